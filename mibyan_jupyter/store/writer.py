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
* a compaction (``CompactionNotice``): a child session (``link_kind='compression'``)
  holding the compacted transcript, with the lease moved to it; :attr:`StoreWriter.session_id`
  becomes the child's and every later write goes there (:meth:`StoreWriter.on_switch`).

The writes run on a thread (:mod:`.lane`), never on the kernel's event loop: the writer is
an async subscriber that awaits each write for up to ``patience`` seconds, so normally a
message is durable before the next subscriber sees its event, and a lock held by another
process or a slow disk never freezes the loop (docs/architecture.md, "Store"). Timestamps
and the call's latency are taken when the event arrives, not when a delayed write lands.

A store failure must never break the agent. A failure that may pass (locked, disk full,
read-only) is logged once, kept in :attr:`StoreWriter.error`, and the writes from there on
are kept in order and retried; once they are made the error is cleared. Keeping them in
order, rather than skipping one, keeps the stored transcript a gap-free prefix of the real
one, which resume can always repair; a transcript with a hole in the middle (a tool result
without its call) it could not. A failure that does not pass (the database was closed,
another kernel took the session's lease: see :mod:`.lease`) stops the writer for good.
:meth:`StoreWriter.take_news` gives the cell one line when writing fails and one when it
recovered.

Only messages, usage, tool arguments and approval reasons are written, and the text of
each goes through :data:`~mibyan_jupyter.secrets.REDACT` first: a key the model or a tool
echoes (into a command line, an error message) never reaches the file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future
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
from mibyan_jupyter.core.messages import AssistantMessage, Usage
from mibyan_jupyter.core.notices import (
    CompactionNotice,
    FallbackNotice,
    NoteNotice,
    RetryNotice,
)
from mibyan_jupyter.store import writer_ops as ops
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.lane import RETRY_S, Op, Reports, WriteLane
from mibyan_jupyter.store.records import index_pending, new_id
from mibyan_jupyter.store.writer_calls import CallLedger, session_row, together
from mibyan_jupyter.store.writer_ops import provider_label as provider_label  # tests import it

_log = logging.getLogger(__name__)

PATIENCE_S = 0.5
"""How long a run waits for one write before it goes on and the write is kept for later."""
SwitchListener = Callable[[str, str], None]
"""Told ``(old_session_id, new_session_id)`` when a compaction moved the writer."""
Fence = Callable[[Conn], None]
"""Runs first in every write transaction; raises to refuse it (see :meth:`.lease.Lease.fence`)."""


class StoreWriter:
    """An async event subscriber that records one session. The session row must exist
    (create it with :func:`~mibyan_jupyter.store.records.insert_session`); the constructor
    raises :class:`StoreError` when it cannot be read, and after that nothing raises.

    ``model`` is the model string the agent was configured with (``provider:model``), for
    the ledger's provider column; it defaults to the session row's model, because the
    reply's own ``model`` is the provider's bare model id. ``fence`` guards every write
    (the session's lease; :meth:`hold` sets it later); ``retry``: the pauses between
    attempts of a failing write.
    """

    def __init__(
        self,
        db: StoreDatabase,
        session_id: str,
        *,
        model: str | None = None,
        fence: Fence | None = None,
        patience: float = PATIENCE_S,
        retry: tuple[float, ...] = RETRY_S,
    ) -> None:
        stored_model, stored_messages = session_row(db, session_id)
        self.db = db
        self.session_id = session_id
        self.model: str | None = model if model is not None else stored_model
        self.fence: Fence | None = fence
        self.patience = patience
        self.last_seq: int | None = None
        """The sequence number of the last message written (durable when this is set)."""
        self.stored_messages: int = stored_messages
        """How many messages the session has in the store, as far as this writer knows:
        those it found, plus those it wrote (another writer's would make it stale)."""
        self._switch_listeners: list[SwitchListener] = []
        self._calls = CallLedger()
        self._awaiting: set[str] = set()
        self._reports = Reports(session_id, _log)
        self._lane = WriteLane(
            db,
            on_fail=self._reports.failed,
            on_recover=self._reports.recovered,
            on_stop=self._reports.stopped,
            retry=retry,
        )

    @property
    def error(self) -> StoreError | None:
        """The store failure in effect: set when a write fails (or waits longer than
        ``patience``), cleared once the writes kept since are made; after a failure that
        does not pass (closed database, lost lease) it stays and nothing more is written."""
        return self._lane.stopped or self._lane.failing

    @property
    def stopped(self) -> StoreError | None:
        """The failure that stopped this writer for good, if any."""
        return self._lane.stopped

    def on_switch(self, listener: SwitchListener) -> Callable[[], None]:
        """Call ``listener(old_id, new_id)`` each time a compaction moves this writer to a
        child session, once the child is committed (on the writer's thread): the kernel's
        state follows it (the notebook's current session, the view's header). Returns the
        call that removes the listener again (a cell's view follows only during its run)."""
        self._switch_listeners.append(listener)

        def remove() -> None:
            if listener in self._switch_listeners:
                self._switch_listeners.remove(listener)

        return remove

    def write(self, op: Op) -> None:
        """Queue one more write on this writer's lane: ordered with the transcript, fenced
        by the lease, kept and retried like the rest (the spilled results use it)."""
        if self._lane.stopped is None:
            self._lane.submit(self._guarded(op))

    def bill(self, usage: Usage, model: str | None = None) -> None:
        """A ledger row for a model call made outside the loop's events (the memory
        flushes): queued on the lane like every write, so a session's cost stays the sum
        of its ledger rows (docs/architecture.md, "Budgets")."""
        op = self._calls.billed(self.session_id, self.model, usage, model)
        if op is not None:
            self.write(op)

    def hold(self, fence: Fence) -> None:
        """Guard every write from now on with ``fence`` (the session's lease)."""
        self.fence = fence

    async def __call__(self, event: AgentEvent) -> None:
        if self._lane.stopped is not None:
            return
        try:
            op = self._handle(event)
        except Exception as error:  # a bug here must not break the run either
            _log.exception("the store writer could not handle %s: %s", event.type, error)
            return
        if op is None:
            return
        healthy = self._lane.failing is None
        first = self._lane.submit(self._guarded(op))
        if healthy:
            await self._wait(first)

    async def _wait(self, first: Future[StoreError | None]) -> None:
        """Wait for the write, up to ``patience``: the loop runs meanwhile (clicks,
        interrupts, the view), only this run's next event waits."""
        waiter = asyncio.wrap_future(first)
        done, _ = await asyncio.wait({waiter}, timeout=self.patience)
        if not done:
            self._lane.stall(
                StoreError(
                    f"{self.db.path} is locked by another process or busy: a write of session"
                    f" {self.session_id[:8]} waited more than {self.patience:g} s; the run"
                    " goes on and the writes are kept until they can be made",
                    kind="locked",
                )
            )

    def _guarded(self, op: Op) -> Op:
        def run(conn: Conn) -> Callable[[], None] | None:
            if self.fence is not None:
                self.fence(conn)
            return op(conn)

        return run

    def drain(self, timeout: float | None = None) -> bool:
        """Wait (blocking) until every write is made or the writer stopped; whether it was."""
        return self._lane.drain(timeout)

    def close(self) -> None:
        """Write nothing more (what is still kept is dropped)."""
        self._lane.close()

    def take_news(self) -> list[str]:
        """Lines for the user since the last call: writing failed, recovered, stopped."""
        return self._reports.take()

    def _handle(self, event: AgentEvent) -> Op | None:
        """Bookkeeping for ``event`` now, and the write it needs (``None``: none)."""
        match event:
            case AgentStart():
                self._calls.begin()
                self._awaiting.clear()
                return ops.status(self.session_id, "running")
            case CompactionNotice():
                # The summary call's ledger row lands in the parent (the session that paid
                # for it), in the same transaction as the move to the child.
                billed = self._calls.billed(self.session_id, self.model, event.usage, None)
                self._calls.begin()
                return together(billed, self._compacted(event))
            case TurnStart():
                self._calls.begin()
            case MessageEnd(message=AssistantMessage() as message):
                return self._calls.assistant(self.session_id, self.model, message, self._inserted)
            case MessageEnd(message=message):
                self._calls.begin()
                return ops.message(self.session_id, message, self._inserted)
            case ToolExecutionStart():
                arguments = self._calls.arguments.get(event.call_id)
                return ops.tool_started(self.session_id, event, arguments)
            case ApprovalRequested():
                self._awaiting.add(event.call_id)
                return ops.approval_requested(self.session_id, event.call_id)
            case ApprovalResolved():
                return self._approval_resolved(event)
            case ToolExecutionEnd():
                return ops.tool_ended(self.session_id, event)
            case AgentEnd():
                self._awaiting.clear()
                status = ops.status(self.session_id, "idle", end_reason=event.reason)
                # The full-text index is caught up in one batch per run, not per message
                # (that doubled the cost of a durable append; see the migration).
                self._lane.submit_call(lambda: index_pending(self.db))
                return status
            case RetryNotice() | FallbackNotice():
                return self._calls.attempt_failed(self.session_id, self.model, event)
            case MessageStart() | MessageUpdate() | ToolExecutionUpdate() | TurnEnd():
                pass
            case BudgetUpdated() | NoteNotice():
                pass  # ephemeral: never stored (docs/architecture.md, "Prompt builder")
            case _:
                assert_never(event)
        return None

    def _compacted(self, notice: CompactionNotice) -> Op | None:
        """Continue in a child session holding the compacted transcript
        (docs/architecture.md, "Context compression"). The id is chosen now, so every
        write made after this event goes to the child even while this one is kept for a
        retry; a notice without the transcript (an older producer) changes nothing."""
        messages = tuple(notice.messages)
        if not messages:
            return None
        parent, child = self.session_id, new_id()
        self.session_id = self._reports.session_id = child

        def switched() -> None:
            self.stored_messages = len(messages)
            self.last_seq = len(messages) - 1
            for listener in list(self._switch_listeners):
                try:
                    listener(parent, child)
                except Exception as error:  # a listener's bug must not stop the writer
                    _log.exception("a session-switch listener failed: %s", error)

        return ops.compaction(parent, child, messages, switched)

    def _inserted(self, seq: int) -> None:
        """A message is written (on the lane's thread, once committed)."""
        self.last_seq = seq
        self.stored_messages += 1

    def _approval_resolved(self, event: ApprovalResolved) -> Op:
        was_awaiting = event.call_id in self._awaiting
        self._awaiting.discard(event.call_id)
        last = was_awaiting and not self._awaiting
        return ops.approval_resolved(self.session_id, event, last_pending=last)
