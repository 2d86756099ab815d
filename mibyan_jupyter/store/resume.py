"""Carrying on after a restart: load a session, repair its transcript, rebuild the Agent.

The store keeps what happened, including the damage a crash leaves: an assistant message
whose tool calls never got results (the kernel died mid-batch, or a fork cut the batch),
aborted partial replies. Providers reject a tool call without a result, so before the
model sees the transcript (docs/architecture.md, "Decisions", 5) :func:`repair` gives each such call a synthetic
error result saying the outcome is unknown and the call may or may not have run; a call
known never to have started (it was waiting for approval) says so instead. Aborted and
failed replies stay for display; the core's ``ModelView`` already leaves them out.

Repair is a pure function of the stored messages, and the synthetic results are not
written back: they go right after the batch's real results, so the same repair finds the
same place however many messages a resumed run appends later, and the stored record keeps
only what really happened.

A compressed session continues in its newest ``compression`` descendant, so that is the
one loaded; a pending approval is reported by :func:`pending_approvals` so the UI can show
it again after a restart.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.core.agent import Agent
from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolCall, ToolMessage
from mibyan_jupyter.core.stream import StreamFn
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.sessions import SessionInfo, SessionStore

UNKNOWN_OUTCOME = (
    "Tool call interrupted before its result was recorded (the session ended unexpectedly); "
    "its outcome is unknown: it may or may not have run. Check before repeating it."
)
NOT_RUN = "Tool call never ran: the session ended while it was waiting for the user's approval."


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call that was waiting for the user's decision when its session stopped."""

    session_id: str
    call_id: str
    name: str
    arguments: str
    """The arguments as the model produced them (JSON text)."""
    reason: str | None
    requested_at: float | None


def _missing_result(
    call: ToolCall, after: AssistantMessage, not_run: Collection[str]
) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id,
        name=call.function.name,
        content=NOT_RUN if call.id in not_run else UNKNOWN_OUTCOME,
        is_error=True,
        details={"synthetic": True, "outcome": "not_run" if call.id in not_run else "unknown"},
        timestamp=after.timestamp,
    )


def repair(messages: Sequence[Message], *, not_run: Collection[str] = ()) -> list[Message]:
    """The transcript with every tool call of a sendable assistant message answered.

    A missing result is inserted right after the results its batch does have; calls in
    ``not_run`` get :data:`NOT_RUN`, others :data:`UNKNOWN_OUTCOME`. A tool result that
    answers no open call (a duplicate, or a stray) is dropped: no provider accepts it.
    Everything else is kept as it is, aborted and failed replies included.
    """
    repaired: list[Message] = []
    batch: AssistantMessage | None = None
    open_calls: dict[str, ToolCall] = {}
    for message in messages:
        if message.role == "tool":
            if open_calls and open_calls.pop(message.tool_call_id, None) is not None:
                repaired.append(message)
            continue
        if open_calls and batch is not None:
            repaired += [_missing_result(c, batch, not_run) for c in open_calls.values()]
            open_calls = {}
        repaired.append(message)
        if message.role == "assistant" and message.tool_calls and message.sendable:
            batch = message
            open_calls = {call.id: call for call in message.tool_calls}
    if open_calls and batch is not None:
        repaired += [_missing_result(c, batch, not_run) for c in open_calls.values()]
    return repaired


def _resolve(store: SessionStore, session_id: str, notebook_path: str | None) -> SessionInfo:
    """``"last"`` (of the notebook, when given) or an id/prefix, then the newest
    compression descendant: the session that continues the conversation (one sweep for
    dead owners, in :meth:`SessionStore.resolve`)."""
    found = store.resolve(session_id, notebook=notebook_path)
    if found is None:
        where = f" for {notebook_path}" if notebook_path else ""
        raise StoreError(f"no session to resume{where}")
    return found


def load_transcript(store: SessionStore, session_id: str) -> list[Message]:
    """The stored messages (unrepaired, for display) of the session that continues
    ``session_id`` (or ``"last"``), following compression lineage."""
    return load_messages(store.db, _resolve(store, session_id, None).id)


def pending_approvals(store: SessionStore, session_id: str) -> list[PendingApproval]:
    """Tool calls still awaiting approval (and without a result) in the session that
    continues ``session_id``, in the order they were asked."""
    return _pending(store, _resolve(store, session_id, None).id)


def _pending(store: SessionStore, session_id: str) -> list[PendingApproval]:
    rows = store.db.conn.execute(
        "SELECT call_id, name, arguments, reason, requested_at FROM tool_calls t"
        " WHERE t.session_id = ? AND t.status = 'awaiting_approval' AND NOT EXISTS"
        " (SELECT 1 FROM messages m WHERE m.session_id = t.session_id"
        "  AND m.tool_call_id = t.call_id)"
        " ORDER BY coalesce(t.requested_at, t.started_at), t.rowid",
        (session_id,),
    )
    return [PendingApproval(session_id, *row) for row in rows]


def resume_agent(
    store: SessionStore,
    session_id: str | SessionInfo = "last",
    *,
    stream_fn: StreamFn,
    notebook_path: str | None = None,
    **agent_kwargs: Any,
) -> tuple[Agent, SessionInfo]:
    """An :class:`Agent` holding the repaired transcript of ``session_id`` (an id, a
    prefix, or ``"last"``: the most recent session, of ``notebook_path`` when given),
    ready for ``prompt()`` or ``continue_()``; with the session it continues.

    The model comes from the session and the system prompt from its config
    (``"system_prompt"``); ``agent_kwargs`` (tools, approval, budget, ...) are passed on
    and win over both. The agent has no subscribers: wire the store's writer to it.

    A :class:`SessionInfo` (what :meth:`SessionStore.resolve` returns) is taken as the
    session to continue, as it is: the caller has resolved it, so the store is not read
    for it again (opening a session sweeps for dead owners once, in ``resolve``).
    """
    if isinstance(session_id, SessionInfo):
        info = session_id
    else:
        info = _resolve(store, session_id, notebook_path)
    waiting = {p.call_id for p in _pending(store, info.id)}
    messages = repair(load_messages(store.db, info.id), not_run=waiting)
    options: dict[str, Any] = {}
    if info.model:
        options["model"] = info.model
    system_prompt = info.config.get("system_prompt")
    if isinstance(system_prompt, str):
        options["system_prompt"] = system_prompt
    options.update(agent_kwargs)
    return Agent(stream_fn=stream_fn, messages=messages, **options), info
