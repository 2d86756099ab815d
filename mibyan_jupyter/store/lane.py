"""The store writer's lane: its writes, in order, on a thread of their own.

Why a thread: a write may have to wait for SQLite's write lock (another kernel, a
checkpoint) or for a slow disk, and that wait must never run on the kernel's event loop,
which also carries the view's clicks and Kernel > Interrupt (docs/architecture.md,
"Store"). The writer hands each write to the lane and awaits it briefly (so in the normal
case a message is durable before the next subscriber sees its event); the loop runs freely
meanwhile.

Why a queue that survives failures: a write that fails because of something that passes
(a lock held by another process, a full disk, a read-only file made writable again) is
kept, with everything after it, in order, and retried with growing pauses
(:data:`RETRY_S`); when the cause goes away the lane catches up. The queue holds the
transcript's own message objects, not copies. So the stored transcript is always a
gap-free prefix of the real one, and complete again after recovery. Failures that do not
pass (the database was closed, another kernel took the session's lease) stop the lane for
good and drop what it held.

The writes go through the writer's :class:`~.db.Database` connection, whose lock keeps the
lane's transactions and the loop thread's apart.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import StoreError, write_failure

After = Callable[[], None]
Op = Callable[[Conn], After | None]
"""One write: statements run inside a transaction the lane holds; what it returns is
called once that transaction has committed (so no one is told of a write that a failed
commit undid)."""

RETRY_S = (1.0, 2.0, 5.0, 10.0)
"""Pauses between attempts of a failing write (the last one repeats)."""
IDLE_S = 30.0
"""The thread ends after this long with nothing to write (it starts again on demand)."""
PERMANENT = frozenset({"closed", "lease"})
"""Failure kinds that do not pass by themselves: the lane stops for good."""


@dataclass(eq=False)
class _Item:
    op: Op | None
    call: Callable[[], object] | None = None
    """Run instead of ``op``, outside any transaction (it makes its own)."""
    first: Future[StoreError | None] = field(default_factory=Future)
    """Resolved by the first attempt: ``None`` when it was written, else the failure."""


class WriteLane:
    """Ordered writes on a daemon thread. ``on_fail(error)`` runs when writes start
    failing (once per failing spell), ``on_recover(count)`` when the ``count`` writes kept
    since have been made, ``on_stop(error)`` when the lane stops for good; all three on
    the lane's thread."""

    def __init__(
        self,
        db: StoreDatabase,
        *,
        on_fail: Callable[[StoreError], None] | None = None,
        on_recover: Callable[[int], None] | None = None,
        on_stop: Callable[[StoreError], None] | None = None,
        retry: tuple[float, ...] = RETRY_S,
        idle: float = IDLE_S,
    ) -> None:
        self.db = db
        self.retry = retry
        self.idle = idle
        self._on_fail = on_fail
        self._on_recover = on_recover
        self._on_stop = on_stop
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._kept = 0
        self._reporting = False
        self.failing: StoreError | None = None
        """The failure in effect (writes are kept until it passes); ``None`` when healthy."""
        self.stopped: StoreError | None = None
        """The failure that stopped the lane for good."""

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def submit(self, op: Op) -> Future[StoreError | None]:
        """Queue ``op``; the future tells how its first attempt went."""
        return self._queue_item(_Item(op))

    def submit_call(self, call: Callable[[], object]) -> Future[StoreError | None]:
        """Queue ``call``, which holds its own transactions (index maintenance)."""
        return self._queue_item(_Item(None, call))

    def _queue_item(self, item: _Item) -> Future[StoreError | None]:
        with self._cond:
            if self.stopped is not None:
                item.first.set_result(self.stopped)
                return item.first
            self._queue.append(item)
            if self.failing is not None:
                self._kept += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mibyan-store", daemon=True)
                self._thread.start()
            self._cond.notify()
        return item.first

    def stall(self, error: StoreError) -> None:
        """The writer gave up waiting for a write: count it as failing (until it lands)."""
        with self._cond:
            if self.failing is not None or self.stopped is not None or not self._queue:
                return
            self._kept = len(self._queue)
            if self._on_fail is not None:  # the line first, as in _failed
                self._on_fail(error)
            self.failing = error

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every write is made (or the lane stopped); whether it was."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._queue and not self._reporting) or self.stopped is not None,
                timeout,
            )

    def close(self) -> None:
        """Write nothing more: what is still queued is dropped."""
        closed = StoreError(f"the store writer of {self.db.path} was closed", kind="closed")
        self._stop(closed, report=False)

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        attempts = 0
        while True:
            with self._cond:
                if not self._cond.wait_for(
                    lambda: self._queue or self.stopped is not None, self.idle
                ):
                    self._thread = None  # idle: a later submit starts a new thread
                    return
                if self.stopped is not None:
                    return
                item = self._queue[0]
            error = self._attempt(item)
            if error is None:
                attempts = 0
                self._written(item)
                continue
            if error.kind in PERMANENT:
                self._stop(error)  # told first, then the item resolved with the rest
                return
            _resolve(item, error)
            self._failed(error)
            pause = self.retry[min(attempts, len(self.retry) - 1)]
            attempts += 1
            with self._cond:
                self._cond.wait_for(lambda: self.stopped is not None, pause)

    def _attempt(self, item: _Item) -> StoreError | None:
        after: After | None = None
        try:
            if item.call is not None:
                item.call()
            elif item.op is not None:
                with self.db.transaction() as conn:
                    after = item.op(conn)
        except Exception as error:  # whatever it is, the run must go on
            return write_failure(self.db.path, error)
        if after is not None:
            after()
        return None

    def _written(self, item: _Item) -> None:
        recovered = 0
        with self._cond:
            self._queue.popleft()
            self._reporting = True  # drain() waits for the news too
            if self.failing is not None and not self._queue:
                recovered, self._kept, self.failing = max(self._kept, 1), 0, None
        try:
            _resolve(item, None)
            if recovered and self._on_recover is not None:
                self._on_recover(recovered)
        finally:
            with self._cond:
                self._reporting = False
                self._cond.notify_all()

    def _failed(self, error: StoreError) -> None:
        with self._cond:
            if self.failing is None:
                self._kept = len(self._queue)
                # The line is recorded before the failure shows: whoever sees the writer
                # failing finds its line already there.
                if self._on_fail is not None:
                    self._on_fail(error)
            self.failing = error  # the latest cause: a stall becomes the real reason

    def _stop(self, error: StoreError, *, report: bool = True) -> None:
        with self._cond:
            if self.stopped is not None:
                return
            self.stopped = error
            dropped = list(self._queue)
            self._queue.clear()
            self._reporting = True
        try:
            # The report comes before the waiting write is resolved: a run that sees
            # the write refused finds the writer's line already there.
            if report and self._on_stop is not None:
                self._on_stop(error)
            for item in dropped:
                _resolve(item, error)
        finally:
            with self._cond:
                self._reporting = False
                self._cond.notify_all()


class Reports:
    """What a lane's failures mean to the user: one line when writing fails, one when it
    recovered, one when it stopped (taken by :meth:`take`, for the cell), each also a log
    record of ``log`` (the writer's logger)."""

    def __init__(self, session_id: str, log: logging.Logger) -> None:
        self.session_id = session_id
        self._log = log
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def take(self) -> list[str]:
        with self._lock:
            lines, self._lines = self._lines, []
        return lines

    def _tell(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def failed(self, error: StoreError) -> None:
        self._log.error(
            "the session store cannot record session %s for now: %s", self.session_id, error
        )
        self._tell(
            f"the session store failed: {error} (the run goes on; what is not saved yet is"
            " kept and retried)"
        )

    def recovered(self, count: int) -> None:
        self._log.warning("the session store records session %s again", self.session_id)
        noun = "write" if count == 1 else "writes"
        self._tell(
            f"the session store recovered: {count} kept {noun} made; session"
            f" {self.session_id[:8]} is complete again"
        )

    def stopped(self, error: StoreError) -> None:
        self._log.error(
            "the session store stopped recording session %s: %s", self.session_id, error
        )
        if error.kind == "lease":
            self._tell(str(error))
        else:
            self._tell(f"the session store stopped: {error}; nothing more of this run is saved")


def _resolve(item: _Item, outcome: StoreError | None) -> None:
    if not item.first.done():
        item.first.set_result(outcome)
