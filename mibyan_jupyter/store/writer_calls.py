"""The store writer's record of the model call in progress, how two writes become one,
and what a writer starts from (the session's model and how many messages it holds).

Kept apart from :mod:`.writer` (the event subscriber) so that module stays the dispatch:
here is what the usage ledger needs about a call — when it started (latency), how many
attempts were retried, the model a fallback moved away from — and the ledger row of each
attempt a notice says was billed, of a call made outside the loop's events (the memory
flushes), and of each finished reply; what each row holds is :mod:`.writer_ops`'
(docs/architecture.md, "Provider accounting").
"""

from __future__ import annotations

import sqlite3
import time

from mibyan_jupyter.core.messages import AssistantMessage, Usage
from mibyan_jupyter.core.notices import FallbackNotice, RetryNotice
from mibyan_jupyter.store import writer_ops as ops
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.lane import After, Op
from mibyan_jupyter.store.writer_ops import ModelCall, Written, provider_label


class CallLedger:
    """The call in progress (a :class:`~.writer_ops.ModelCall`) and the arguments of the
    last reply's tool calls, which each call's start is written with."""

    def __init__(self) -> None:
        self.call = ModelCall()
        self.arguments: dict[str, str] = {}

    def begin(self) -> None:
        """A new model call is about to be sent (see :class:`~.writer_ops.ModelCall`)."""
        self.call = ModelCall()

    def assistant(
        self,
        session_id: str,
        configured: str | None,
        message: AssistantMessage,
        inserted: Written,
    ) -> Op:
        """The reply and its ledger row, in one write; the next call begins."""
        call = self.call
        requested = call.fallback_to or configured or message.model
        op = ops.assistant(
            session_id,
            message,
            inserted,
            requested=requested,
            provider=provider_label(requested),
            latency_ms=(time.perf_counter() - call.started) * 1000.0,
            retries=call.retries,
            fallback_from=call.fallback_from,
        )
        self.arguments = {c.id: c.function.arguments for c in message.tool_calls}
        self.begin()
        return op

    def billed(
        self, session_id: str, configured: str | None, usage: Usage | None, model: str | None
    ) -> Op | None:
        """The ledger row of an attempt that was billed (``None``: nothing known was
        used). ``configured``: the agent's model string, for the provider column."""
        if usage is None:
            return None
        call = self.call
        requested = call.fallback_to or configured
        return ops.attempt(
            session_id,
            usage,
            model=model or requested,
            provider=provider_label(requested),
            latency_ms=(time.perf_counter() - call.started) * 1000.0,
            retries=call.retries,
            fallback_from=call.fallback_from,
        )

    def attempt_failed(
        self, session_id: str, configured: str | None, notice: RetryNotice | FallbackNotice
    ) -> Op | None:
        """A retry or a failover: the failed attempt's row, and the call counts it."""
        if isinstance(notice, RetryNotice):
            op = self.billed(session_id, configured, notice.usage, notice.model)
            self.call.retries += 1
            return op
        op = self.billed(session_id, configured, notice.usage, notice.from_model)
        self.call.fallback_from = self.call.fallback_from or notice.from_model
        self.call.fallback_to = notice.to_model
        return op


def together(first: Op | None, second: Op | None) -> Op | None:
    """Two writes as one (one transaction, in order); what each needs after the commit
    runs in the same order."""
    if first is None or second is None:
        return first or second

    def run(conn: Conn) -> After | None:
        afters = [after for after in (first(conn), second(conn)) if after is not None]

        def committed() -> None:
            for after in afters:
                after()

        return committed if afters else None

    return run


def session_row(db: StoreDatabase, session_id: str) -> tuple[str | None, int]:
    """The session's model and its number of stored messages; raises :class:`StoreError`
    when it cannot be read or does not exist (a programming error: found when the writer
    is made, not as a foreign-key failure mid-run)."""
    try:
        row = db.conn.execute(
            "SELECT model, (SELECT count(*) FROM messages WHERE session_id = ?)"
            " FROM sessions WHERE id = ?",
            (session_id, session_id),
        ).fetchone()
    except sqlite3.Error as error:
        raise StoreError(f"cannot read session {session_id!r} from {db.path}: {error}") from None
    if row is None:
        raise StoreError(f"no session {session_id!r} in {db.path}")
    return row[0], int(row[1])
