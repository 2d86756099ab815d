"""The Hermes facade's data: a conversation history in, a ``run_conversation`` dict out.

``Agent.chat`` / ``Agent.run_conversation`` (the README's API) are methods of the Agent;
what they do besides running a prompt lives here: reading an OpenAI-style history
(:func:`read_history`), the final answer's text, the usage of a run, and the result dict
(:func:`conversation_result`). This module does not know the Agent: it reads the few state
fields it needs through :class:`ConversationState`, so the Agent can import it and nothing
here imports back (the sync bridge is :mod:`.sync_bridge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

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


class ConversationState(Protocol):
    """The fields of ``AgentState`` a ``run_conversation`` result is shaped from."""

    @property
    def system_prompt(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def last_end_reason(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...


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


def read_history(
    conversation_history: Sequence[Message | dict[str, Any]],
) -> tuple[str | None, list[Message]]:
    """OpenAI chat dicts or messages -> (the system prompt of a leading system message, if
    any; the checked transcript without it). Raises like ``check_history``."""
    history = _with_tool_names([from_dict(m) for m in conversation_history])
    check_history(history)
    if history and isinstance(history[0], SystemMessage):
        return history[0].content, history[1:]
    return None, history


def conversation_result(
    state: ConversationState, added: Sequence[Message], task_id: str
) -> dict[str, Any]:
    """``{"messages", "metadata", "usage"}``: the whole transcript as OpenAI chat dicts
    (plus our extras; the system prompt first), and what this run (``added``) did."""
    transcript: list[Message] = list(state.messages)
    if state.system_prompt:
        transcript.insert(0, SystemMessage(content=state.system_prompt))
    return {
        "messages": [to_dict(m) for m in transcript],
        "metadata": {
            "task_id": task_id,
            "model": state.model,
            "final_response": final_text(added),
            "end_reason": state.last_end_reason,
            "api_calls": sum(isinstance(m, AssistantMessage) for m in added),
            "error": state.error,
        },
        "usage": total_usage(added).model_dump(),
    }
