"""The Hermes facade: ``chat(text) -> str`` and ``run_conversation(...) -> dict``.

Hermes users call these from plain scripts, so each has a sync form. Called from code
that already runs an event loop (a notebook cell, an async app), the sync form runs the
conversation on a private loop in a worker thread and blocks until it is done; async
code should prefer ``achat`` / ``arun_conversation``, which run on the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import uuid
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    from_dict,
    to_dict,
)
from .transcript import check_history

if TYPE_CHECKING:
    from .agent import Agent

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, whether or not a loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}
    # The worker runs in a copy of this context, so context variables set by the caller
    # (e.g. the kernel's current parent message, which routes output to the right cell)
    # hold inside the coroutine too.
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, coro)
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error

    worker = threading.Thread(target=target, name="mibyan-sync", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


async def closing_loop_resources(stream_fn: object, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro``, then let the stream function release what it holds for this event
    loop (a provider's pooled connections): the sync facade runs each call on a loop of
    its own, which is closed right after."""
    try:
        return await coro
    finally:
        close = getattr(stream_fn, "aclose", None)
        if close is not None:
            await close()


def final_text(messages: Sequence[Message]) -> str:
    """The text of the last assistant message that has any."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.content:
            return message.content
    return ""


def total_usage(messages: Sequence[Message]) -> Usage:
    usage = Usage()  # cost stays None unless some call's price is known
    for message in messages:
        if isinstance(message, AssistantMessage):
            usage = usage + message.usage
    return usage


def _with_tool_names(history: list[Message]) -> list[Message]:
    """OpenAI tool messages may omit the tool's name: take it from the matching call."""
    names: dict[str, str] = {}
    filled: list[Message] = []
    for message in history:
        if isinstance(message, AssistantMessage):
            names.update((call.id, call.function.name) for call in message.tool_calls)
        elif isinstance(message, ToolMessage) and not message.name:
            message = message.model_copy(update={"name": names.get(message.tool_call_id, "")})
        filled.append(message)
    return filled


async def achat(agent: Agent, message: str) -> str:
    return final_text(await agent.prompt(message))


async def arun_conversation(
    agent: Agent,
    user_message: str,
    system_message: str | None = None,
    conversation_history: Sequence[Message | dict[str, Any]] | None = None,
    task_id: str | None = None,
) -> dict[str, Any]:
    """Hermes' ``run_conversation``: replaces the transcript with ``conversation_history``
    (OpenAI chat dicts or messages; a leading system message sets the system prompt) when
    given, runs ``user_message``, and returns ``{"messages", "metadata", "usage"}`` with
    messages as OpenAI chat dicts (plus our extras)."""
    task_id = task_id or uuid.uuid4().hex
    if conversation_history is not None:
        history = _with_tool_names([from_dict(m) for m in conversation_history])
        check_history(history)
        if history and isinstance(history[0], SystemMessage):
            agent.state.system_prompt = history[0].content
            history = history[1:]
        agent.state.messages = history
    if system_message is not None:
        agent.state.system_prompt = system_message
    added = await agent.prompt(user_message)
    transcript: list[Message] = list(agent.state.messages)
    if agent.state.system_prompt:
        transcript.insert(0, SystemMessage(content=agent.state.system_prompt))
    usage = total_usage(added)
    return {
        "messages": [to_dict(m) for m in transcript],
        "metadata": {
            "task_id": task_id,
            "model": agent.state.model,
            "final_response": final_text(added),
            "end_reason": agent.state.last_end_reason,
            "api_calls": sum(isinstance(m, AssistantMessage) for m in added),
            "error": agent.state.error,
        },
        "usage": usage.model_dump(),
    }
