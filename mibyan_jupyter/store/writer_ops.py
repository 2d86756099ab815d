"""The writes of the store writer, one function per kind, each returning an :data:`~.lane.Op`.

Why apart from :mod:`.writer`: the writer decides *when* to write (from the event stream)
and runs the writes on its lane; these say *what* is written. Everything an op needs is
taken when it is made, at the event (timestamps, the call's latency, the redacted
arguments), so a write that lands late, after a lock or a full disk passed, still records
when things happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mibyan_jupyter.core.events import ApprovalResolved, ToolExecutionEnd, ToolExecutionStart
from mibyan_jupyter.core.messages import AssistantMessage, Message, Usage, content_text
from mibyan_jupyter.core.tools import CANCELLED
from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.store import audit
from mibyan_jupyter.store.conn import Conn
from mibyan_jupyter.store.lane import Op
from mibyan_jupyter.store.records import insert_message, update_status


def provider_label(model: str | None) -> str | None:
    """``openai`` for ``openai:gpt-4.1-mini``; ``None`` for a bare name (the provider was
    guessed or given by URL, and the store does not import the providers to resolve it)."""
    if model and ":" in model:
        return model.partition(":")[0] or None
    return None


@dataclass
class ModelCall:
    """What the ledger needs about the model call in progress.

    A call starts when the loop is about to send the request: at ``TurnStart`` and after
    each message added before the call (prompts, steering). ``MessageStart`` is no good
    as the start: it is emitted at the first streamed delta, after the time to first
    token and after any retries, so latency and retry counts would miss both.
    """

    started: float = field(default_factory=time.perf_counter)
    retries: int = 0
    fallback_from: str | None = None
    fallback_to: str | None = None


Written = Callable[[int], None]
"""Told the sequence number of a message once it is written (after the commit)."""


class Once:
    """A message's row, written once however often its write is tried.

    On the team store a connection lost at the commit can hide a commit that landed: the
    lane sees ``io`` and tries the write again, which must not store the message twice
    (a gap-free transcript without repeats; docs/architecture.md, "Store", its writer
    that recovers). So the sequence number an attempt wrote is kept, and a later attempt
    that finds that row (one writer per session: the lease) takes it as written instead. A rolled-back attempt
    left no row, so the next one writes it."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.tried: int | None = None

    def landed(self, conn: Conn) -> int | None:
        """The row an earlier attempt wrote, when its commit landed after all."""
        if self.tried is None:
            return None
        row = conn.execute(
            "SELECT 1 FROM messages WHERE session_id = ? AND seq = ?",
            (self.session_id, self.tried),
        ).fetchone()
        return self.tried if row is not None else None


def message(session_id: str, msg: Message, written: Written) -> Op:
    once = Once(session_id)

    def run(conn: Conn) -> Callable[[], None]:
        seq = once.landed(conn)
        if seq is None:
            seq = once.tried = insert_message(conn, session_id, msg)
        return lambda: written(seq)

    return run


def _ledger_row(
    conn: Conn,
    session_id: str,
    seq: int | None,
    usage: Usage,
    *,
    model: str | None,
    provider: str | None,
    api: str | None,
    latency_ms: float,
    retries: int,
    fallback_from: str | None,
    created_at: float,
) -> None:
    """One row of the usage ledger (``seq`` ``None``: an attempt that kept no message)."""
    conn.execute(
        "INSERT INTO usage_ledger (session_id, message_seq, model, provider, api,"
        " input_tokens, output_tokens, cache_read, cache_write, reasoning, cost,"
        " latency_ms, retries, fallback_from, created_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            session_id,
            seq,
            model,
            provider,
            api,
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write,
            usage.reasoning,
            usage.cost,
            latency_ms,
            retries,
            fallback_from,
            created_at,
        ),
    )


def assistant(
    session_id: str,
    msg: AssistantMessage,
    written: Written,
    *,
    requested: str | None,
    provider: str | None,
    latency_ms: float,
    retries: int,
    fallback_from: str | None,
) -> Op:
    """The message and its ledger row land together: a usage row never points at a
    message that is not there, and one commit serves both."""
    now = time.time()
    once = Once(session_id)

    def run(conn: Conn) -> Callable[[], None]:
        landed = once.landed(conn)
        if landed is not None:  # with its ledger row: one transaction
            return lambda: written(landed)
        seq = once.tried = insert_message(conn, session_id, msg)
        _ledger_row(
            conn,
            session_id,
            seq,
            msg.usage,
            model=msg.model or requested,
            provider=provider,
            api=msg.api,
            latency_ms=latency_ms,
            retries=retries,
            fallback_from=fallback_from,
            created_at=now,
        )
        return lambda: written(seq)

    return run


def attempt(
    session_id: str,
    usage: Usage,
    *,
    model: str | None,
    provider: str | None,
    latency_ms: float,
    retries: int,
    fallback_from: str | None,
) -> Op:
    """A ledger row for an attempt that was billed but kept no message (a retried or
    failed-over call, as its notice reports): ``message_seq`` is NULL."""
    now = time.time()

    def run(conn: Conn) -> None:
        _ledger_row(
            conn,
            session_id,
            None,
            usage,
            model=model,
            provider=provider,
            api=None,
            latency_ms=latency_ms,
            retries=retries,
            fallback_from=fallback_from,
            created_at=now,
        )

    return run


def tool_started(session_id: str, event: ToolExecutionStart, arguments: str | None) -> Op:
    """One row per call. The arguments are the model's own text (from the assistant
    message that asked), else the parsed arguments as JSON. A call id seen before in this
    session (some local servers number calls per reply) replaces the old row rather than
    failing the store."""
    if arguments is None:
        arguments = (
            event.args if isinstance(event.args, str) else json.dumps(event.args, default=str)
        )
    text = REDACT(arguments)  # a model may echo a key into a command line
    row = (session_id, event.call_id, event.name, text, time.time())

    def run(conn: Conn) -> None:
        conn.execute(
            "INSERT INTO tool_calls (session_id, call_id, name, arguments, status, started_at)"
            " VALUES (?,?,?,?,'running',?)"
            " ON CONFLICT (session_id, call_id) DO UPDATE SET name = excluded.name,"
            " arguments = excluded.arguments, status = 'running', decision = NULL,"
            " scope = NULL, decided_by = NULL, reason = NULL, requested_at = NULL,"
            " decided_at = NULL, started_at = excluded.started_at, finished_at = NULL",
            row,
        )

    return run


def approval_requested(session_id: str, call_id: str) -> Op:
    """Written as it is asked, with the session's status, in one transaction: after a
    crash there is no doubt about what was pending."""
    now = time.time()

    def run(conn: Conn) -> None:
        conn.execute(
            "UPDATE tool_calls SET status = 'awaiting_approval', requested_at = ?"
            " WHERE session_id = ? AND call_id = ?",
            (now, session_id, call_id),
        )
        update_status(conn, session_id, "awaiting_approval")

    return run


def approval_detail(event: ApprovalResolved) -> dict[str, object]:
    """An approval's audit row: the tool, the decision, its scope and who made it (a
    click, the policy, a remembered rule; docs/architecture.md, "Admin policy")."""
    return {
        "call_id": event.call_id,
        "tool": event.name,
        "approved": event.approved,
        "scope": event.scope,
        "decided_by": event.decided_by,
        "reason": event.reason,
    }


def approval_resolved(session_id: str, event: ApprovalResolved, *, last_pending: bool) -> Op:
    """``decided_by`` is ``user`` for a click, else policy / timeout / abort / error. A
    denied call never runs (its result will be an error), so it is marked so at once;
    the session runs again when the last pending approval is decided."""
    row = (
        "approved" if event.approved else "denied",
        event.scope,
        event.decided_by,
        None if event.reason is None else REDACT(event.reason),
        time.time(),
        "running" if event.approved else "error",
        session_id,
        event.call_id,
    )

    def run(conn: Conn) -> None:
        conn.execute(
            "UPDATE tool_calls SET decision = ?, scope = ?, decided_by = ?,"
            " reason = ?, decided_at = ?, status = ? WHERE session_id = ? AND call_id = ?",
            row,
        )
        audit.record(conn, "approval", approval_detail(event), session_id=session_id)
        if last_pending:
            update_status(conn, session_id, "running")

    return run


def tool_ended(session_id: str, event: ToolExecutionEnd) -> Op:
    if content_text(event.result.content) == CANCELLED:
        status = "cancelled"
    else:
        status = "error" if event.is_error else "done"
    row = (status, time.time(), session_id, event.call_id)

    def run(conn: Conn) -> None:
        conn.execute(
            "UPDATE tool_calls SET status = ?, finished_at = ? WHERE session_id = ? AND call_id = ?",
            row,
        )

    return run


def status(session_id: str, value: str, *, end_reason: str | None = None) -> Op:
    def run(conn: Conn) -> None:
        update_status(conn, session_id, value, end_reason=end_reason)

    return run


def compaction(
    parent: str, child: str, messages: Sequence[Message], switched: Callable[[], None]
) -> Op:
    """The child session a compaction continues in, in one transaction: a copy of the
    parent's row (title, model, notebook, config with its pins, status) linked to it
    (``link_kind='compression'``, ``fork_at``: how many of its first messages are the
    compacted transcript), those messages, the approval records of their tool calls, and
    the lease moved from the parent to the child (same token, so the kernel's
    :class:`~.lease.Lease` follows it); the parent is left idle, ended ``compacted``.
    Nothing is half done: a crash leaves the parent as it was, or the child whole."""
    kept = tuple(messages)

    def run(conn: Conn) -> Callable[[], None]:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (child,)).fetchone():
            return switched  # an earlier attempt's commit landed (see :class:`Once`)
        now = time.time()
        conn.execute(
            "INSERT INTO sessions (id, parent_id, link_kind, fork_at, title, model, api_mode,"
            " notebook_path, status, owner_pid, owner_host, config, lease_token, lease_pid,"
            " lease_host, lease_heartbeat_at, created_at, updated_at) SELECT ?, id,"
            " 'compression', ?, title, model, api_mode, notebook_path, status, owner_pid,"
            " owner_host, config, lease_token, lease_pid, lease_host, lease_heartbeat_at, ?, ?"
            " FROM sessions WHERE id = ?",
            (child, len(kept), now, now, parent),
        )
        conn.execute(
            "UPDATE sessions SET status = 'idle', owner_pid = NULL, owner_host = NULL,"
            " lease_token = NULL, lease_pid = NULL, lease_host = NULL, lease_heartbeat_at = NULL,"
            " ended_at = ?, end_reason = 'compacted', updated_at = ? WHERE id = ?",
            (now, now, parent),
        )
        for seq, msg in enumerate(kept):
            insert_message(conn, child, msg, seq=seq)
        conn.execute(  # the approval records of the calls the child keeps
            "INSERT INTO tool_calls (session_id, call_id, name, arguments, status,"
            " decision, scope, decided_by, reason, requested_at, decided_at, started_at,"
            " finished_at) SELECT ?, call_id, name, arguments, status, decision, scope,"
            " decided_by, reason, requested_at, decided_at, started_at, finished_at"
            " FROM tool_calls t WHERE t.session_id = ? AND EXISTS (SELECT 1 FROM messages m"
            " WHERE m.session_id = ? AND m.tool_call_id = t.call_id) ON CONFLICT DO NOTHING",
            (child, parent, child),
        )
        return switched

    return run
