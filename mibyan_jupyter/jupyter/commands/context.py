"""``%agent compact``, ``%agent pin TEXT``, ``%agent pins``, ``%agent unpin N``: the
current session's context, by hand (docs/architecture.md, "Prompt builder", "Context
compression").

Why the pins live on the session's prompt builder: the builder renders the system prompt
once per change, so a pin reaches the next request and then stays byte-identical (the
provider's prompt cache keeps hitting); the store keeps them in the session's config so a
resume in another kernel has them too.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from mibyan_jupyter.jupyter.cell.context import session_builder
from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.tables import Message, Table
from mibyan_jupyter.jupyter.state import SessionHandle, kernel_state, notebook_path
from mibyan_jupyter.jupyter.view.texts import compaction_op

if TYPE_CHECKING:
    from mibyan_jupyter.core.prompt import PromptBuilder

T = TypeVar("T")


def _handle() -> SessionHandle:
    """The notebook's current session, opened in this kernel."""
    state = kernel_state()
    current = state.current_session(notebook_path())
    handle = state.session(current) if current is not None else None
    if handle is None:
        raise AgentUsageError("this notebook has no current session yet: run a %%agent cell first")
    return handle


def _builder(handle: SessionHandle) -> PromptBuilder:
    """The session's builder; made here (with the stored pins) before its first cell."""
    agent: Any = handle.agent
    builder: PromptBuilder | None = getattr(agent, "prompt_builder", None)
    if builder is None:
        from mibyan_jupyter.store.session_queries import by_id

        info = by_id(kernel_state().store().db, handle.session_id)
        stored = getattr(getattr(info, "settings", None), "pins", None) or ()
        builder = session_builder(None, agent.state.system_prompt, "", "", tuple(stored))
        agent.prompt_builder = builder
    return builder


def _save(handle: SessionHandle, builder: PromptBuilder) -> None:
    """Persist the pins in the session's config (the store's ``set_pins``)."""
    set_pins = getattr(kernel_state().store(), "set_pins", None)
    if callable(set_pins):
        set_pins(handle.session_id, list(builder.pins))


def _table(builder: PromptBuilder) -> Table:
    rows = [(str(n), text) for n, text in enumerate(builder.pins, 1)]
    return Table(("#", "pinned instruction"), rows, caption="Pinned instructions")


def pins(words: list[str]) -> Table | Message:
    if words:
        raise AgentUsageError("%agent pins takes no arguments (pin TEXT, unpin N)")
    builder = _builder(_handle())
    return _table(builder) if builder.pins else Message("Nothing is pinned (%agent pin TEXT).")


def pin(words: list[str]) -> Table:
    handle = _handle()
    builder = _builder(handle)
    try:
        builder.pin(" ".join(words))
    except ValueError as error:
        raise AgentUsageError(f"%agent pin: {error}") from None
    _save(handle, builder)
    return _table(builder)


def unpin(words: list[str]) -> Table | Message:
    if len(words) != 1 or not words[0].isdigit():
        raise AgentUsageError("%agent unpin takes the pin's number, as %agent pins shows it")
    handle = _handle()
    builder = _builder(handle)
    try:
        text = builder.unpin(int(words[0]))
    except ValueError as error:
        raise AgentUsageError(f"%agent unpin: {error}") from None
    _save(handle, builder)
    return _table(builder) if builder.pins else Message(f"Unpinned: {text}")


def compact(words: list[str]) -> Message:
    """Compact the current session now (when its agent is idle)."""
    if words:
        raise AgentUsageError("%agent compact takes no arguments")
    from mibyan_jupyter.jupyter.cell.admission import ensure_allowed

    ensure_allowed()  # compaction calls the model: not in exam mode ("Admin policy")
    state = kernel_state()
    handle = _handle()
    if state.running(handle.session_id) is not None:
        raise AgentUsageError("the agent is running: compact when it is done (or %agent stop)")
    from mibyan_jupyter.core.agent import AgentBusyError

    agent: Any = handle.agent
    try:
        notice = _run_now(agent.compact())
    except AgentBusyError:
        raise AgentUsageError("the agent is running: compact when it is done") from None
    if notice is None:
        return Message("Nothing to compact: the conversation is already short.")
    return Message(compaction_op(notice)["text"])


def _run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from a line magic: on this thread when no loop runs here,
    else on a worker thread with its own loop (the kernel's loop is busy running us)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, coro)
        except BaseException as error:
            box["error"] = error

    worker = threading.Thread(target=target, name="mibyan-agent-compact", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    result: T = box["value"]
    return result
