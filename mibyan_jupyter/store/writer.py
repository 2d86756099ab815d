"""The store as a subscriber: writes a run to SQLite as its events arrive.

The loop never calls the store; ``agent.subscribe(StoreWriter(db, session_id))`` is the
whole wiring. What is written, each in its own short transaction, so a kernel killed at
any point loses at most the message being streamed (docs/architecture.md, "Decisions", 4):

* every finished message (``MessageEnd``), and for an assistant message its usage-ledger
  row in the same transaction: model, provider, api, tokens, cost, latency, retries and
  the model a fallback moved away from;
* tool calls as they start, their approval as it is asked (with the session shown as
  ``awaiting_approval``, so a restarted kernel can show it again) and as it is decided,
  and their outcome;
* the session status: ``running`` from ``AgentStart``, ``idle`` with the end reason at
  ``AgentEnd``, when the run's messages are also added to the full-text index.

A store failure (disk full, locked beyond the retry window, closed database) must never
break the agent: it is logged once, kept in :attr:`StoreWriter.error`, and the writer
stops writing. Stopping, rather than carrying on, keeps the stored transcript a gap-free
prefix of the real one, which resume can always repair; a transcript with a hole in the
middle (a tool result without its call) it could not.

Only messages, usage, tool arguments and approval reasons are written, and the text of
each goes through :data:`~mibyan_jupyter.secrets.REDACT` first: a key the model or a tool
echoes (into a command line, an error message) never reaches the file.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from typing import assert_never

from mibyan_jupyter.core.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    ApprovalRequested,
    ApprovalResolved,
    BudgetUpdated,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, content_text
from mibyan_jupyter.core.notices import CompactionNotice, FallbackNotice, RetryNotice
from mibyan_jupyter.core.tools import CANCELLED
from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.records import index_pending, insert_message, update_status

_log = logging.getLogger(__name__)


def provider_label(model: str | None) -> str | None:
    """``openai`` for ``openai:gpt-4.1-mini``; ``None`` for a bare name (the provider was
    guessed or given by URL, and the store does not import the providers to resolve it)."""
    if model and ":" in model:
        return model.partition(":")[0] or None
    return None


@dataclass
class _ModelCall:
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


class StoreWriter:
    """A sync event subscriber that records one session. The session row must exist
    (create it with :func:`~mibyan_jupyter.store.records.insert_session`); the constructor
    raises :class:`StoreError` when it cannot be read, and after that nothing raises.

    ``model`` is the model string the agent was configured with (``provider:model``), for
    the ledger's provider column; it defaults to the session row's model, because the
    reply's own ``model`` is the provider's bare model id.
    """

    def __init__(self, db: Database, session_id: str, *, model: str | None = None) -> None:
        try:
            row = db.conn.execute(
                "SELECT model FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(
                f"cannot read session {session_id!r} from {db.path}: {error}"
            ) from None
        if row is None:
            # A programming error: found here, not as a foreign-key failure mid-run.
            raise StoreError(f"no session {session_id!r} in {db.path}")
        self.db = db
        self.session_id = session_id
        self.model: str | None = model if model is not None else row[0]
        self.error: StoreError | None = None
        """The first store failure; once set, nothing more is written."""
        self.last_seq: int | None = None
        """The sequence number of the last message written (durable when this is set)."""
        self._call = _ModelCall()
        self._arguments: dict[str, str] = {}
        self._awaiting: set[str] = set()

    def __call__(self, event: AgentEvent) -> None:
        if self.error is not None:
            return
        try:
            self._handle(event)
        except Exception as error:  # the agent must keep running whatever the store does
            self._fail(event, error)

    def _fail(self, event: AgentEvent, error: Exception) -> None:
        if isinstance(error, StoreError):
            self.error = error
        else:
            self.error = StoreError(
                f"cannot write session {self.session_id} to {self.db.path}: "
                f"{type(error).__name__}: {error}"
            )
            self.error.__cause__ = error
        _log.error(
            "the session store stopped recording session %s (at %s): %s",
            self.session_id,
            event.type,
            self.error,
        )

    def _handle(self, event: AgentEvent) -> None:
        match event:
            case AgentStart():
                self._call = _ModelCall()
                self._awaiting.clear()
                self._status("running")
            case TurnStart() | CompactionNotice():
                self._call = _ModelCall()
            case MessageEnd(message=AssistantMessage() as message):
                self._assistant_message(message)
            case MessageEnd(message=message):
                with self.db.transaction() as conn:
                    self.last_seq = insert_message(conn, self.session_id, message)
                self._call = _ModelCall()
            case ToolExecutionStart():
                self._tool_started(event)
            case ApprovalRequested():
                self._approval_requested(event)
            case ApprovalResolved():
                self._approval_resolved(event)
            case ToolExecutionEnd():
                self._tool_ended(event)
            case AgentEnd():
                self._awaiting.clear()
                self._status("idle", end_reason=event.reason)
                # The full-text index is caught up in one batch per run, not per message
                # (that doubled the cost of a durable append; see the migration).
                index_pending(self.db)
            case RetryNotice():
                self._call.retries += 1
            case FallbackNotice():
                self._call.fallback_from = self._call.fallback_from or event.from_model
                self._call.fallback_to = event.to_model
            case MessageStart() | MessageUpdate() | ToolExecutionUpdate() | TurnEnd():
                pass
            case BudgetUpdated():
                pass
            case _:
                assert_never(event)

    # -- messages and usage ---------------------------------------------------------------

    def _assistant_message(self, message: AssistantMessage) -> None:
        """The message and its ledger row land together: a usage row never points at a
        message that is not there, and one commit serves both."""
        call, now = self._call, time.time()
        latency_ms = (time.perf_counter() - call.started) * 1000.0
        requested = call.fallback_to or self.model or message.model
        usage = message.usage
        with self.db.transaction() as conn:
            seq = insert_message(conn, self.session_id, message)
            conn.execute(
                "INSERT INTO usage_ledger (session_id, message_seq, model, provider, api,"
                " input_tokens, output_tokens, cache_read, cache_write, reasoning, cost,"
                " latency_ms, retries, fallback_from, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    self.session_id,
                    seq,
                    message.model or requested,
                    provider_label(requested),
                    message.api,
                    usage.input,
                    usage.output,
                    usage.cache_read,
                    usage.cache_write,
                    usage.reasoning,
                    usage.cost,
                    latency_ms,
                    call.retries,
                    call.fallback_from,
                    now,
                ),
            )
        self.last_seq = seq
        self._arguments = {c.id: c.function.arguments for c in message.tool_calls}
        self._call = _ModelCall()

    # -- tool calls and approvals -----------------------------------------------------------

    def _tool_started(self, event: ToolExecutionStart) -> None:
        """One row per call. The arguments are the model's own text (from the assistant
        message that asked), else the parsed arguments as JSON. A call id seen before in
        this session (some local servers number calls per reply) replaces the old row
        rather than failing the store."""
        arguments = self._arguments.get(event.call_id)
        if arguments is None:
            arguments = (
                event.args if isinstance(event.args, str) else json.dumps(event.args, default=str)
            )
        arguments = REDACT(arguments)  # a model may echo a key into a command line
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO tool_calls (session_id, call_id, name, arguments, status, started_at)"
                " VALUES (?,?,?,?,'running',?)"
                " ON CONFLICT (session_id, call_id) DO UPDATE SET name = excluded.name,"
                " arguments = excluded.arguments, status = 'running', decision = NULL,"
                " scope = NULL, decided_by = NULL, reason = NULL, requested_at = NULL,"
                " decided_at = NULL, started_at = excluded.started_at, finished_at = NULL",
                (self.session_id, event.call_id, event.name, arguments, time.time()),
            )

    def _approval_requested(self, event: ApprovalRequested) -> None:
        """Written as it is asked, with the session's status, in one transaction: after a
        crash there is no doubt about what was pending."""
        self._awaiting.add(event.call_id)
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE tool_calls SET status = 'awaiting_approval', requested_at = ?"
                " WHERE session_id = ? AND call_id = ?",
                (time.time(), self.session_id, event.call_id),
            )
            update_status(conn, self.session_id, "awaiting_approval")

    def _approval_resolved(self, event: ApprovalResolved) -> None:
        """``decided_by`` is ``user`` for a click, else policy / timeout / abort / error. A
        denied call never runs (its result will be an error), so it is marked so at once."""
        was_awaiting = event.call_id in self._awaiting
        self._awaiting.discard(event.call_id)
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE tool_calls SET decision = ?, scope = ?, decided_by = ?,"
                " reason = ?, decided_at = ?, status = ?"
                " WHERE session_id = ? AND call_id = ?",
                (
                    "approved" if event.approved else "denied",
                    event.scope,
                    event.decided_by,
                    None if event.reason is None else REDACT(event.reason),
                    time.time(),
                    "running" if event.approved else "error",
                    self.session_id,
                    event.call_id,
                ),
            )
            if was_awaiting and not self._awaiting:
                update_status(conn, self.session_id, "running")

    def _tool_ended(self, event: ToolExecutionEnd) -> None:
        if content_text(event.result.content) == CANCELLED:
            status = "cancelled"
        else:
            status = "error" if event.is_error else "done"
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE tool_calls SET status = ?, finished_at = ?"
                " WHERE session_id = ? AND call_id = ?",
                (status, time.time(), self.session_id, event.call_id),
            )

    # -- session status ---------------------------------------------------------------------

    def _status(self, status: str, *, end_reason: str | None = None) -> None:
        with self.db.transaction() as conn:
            update_status(conn, self.session_id, status, end_reason=end_reason)
