"""One writer per session: the lease a kernel holds on the sessions it writes.

Why: two kernels that resume one session and both write it leave a transcript whose turns
interleave, which can no longer be resumed (a tool result lands after the other kernel's
next question). So a kernel writes a session only while it holds its lease
(docs/architecture.md, "Store"):

* :meth:`LeaseKeeper.acquire` takes the lease in one ``BEGIN IMMEDIATE`` transaction when
  nobody holds it, this keeper already does, or the holder is dead; when the holder is
  alive it returns the :class:`Holder` instead (running a turn, or idle: JupyterLab keeps
  the kernels of closed tabs alive), and ``take_over=True`` takes an idle holder's lease.
  Whether a holder is alive is decided by the store's one rule, :mod:`.liveness`.
* Every acquisition has a new token. :meth:`Lease.fence` runs first in each write
  transaction of the session's store writer: once another kernel has taken the lease over,
  the old writer's next write finds another token, raises :class:`LeaseLost` and writes
  nothing. Both steps hold SQLite's write lock (on PostgreSQL, the session row's lock:
  ``SELECT ... FOR UPDATE``), so the two kernels' writes never interleave: each write sees
  the lease as the last committed acquisition left it.
* A daemon thread renews the heartbeat of every lease the keeper holds every
  :data:`HEARTBEAT_S` seconds, in its own connection: ipykernel 7 runs no asyncio task
  between cells (ipykernel #1510), and an idle kernel must still look alive.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.liveness import (
    LIVE_STATUSES,
    LeaseLiveness,
    Liveness,
    Owner,
    env_seconds,
)

_log = logging.getLogger(__name__)

HEARTBEAT_S = env_seconds("MIBYAN_LEASE_HEARTBEAT_S", 3.0)
"""How often a kernel says it is alive (see :data:`~.liveness.STALE_S`)."""

_READ = (
    "SELECT lease_token, lease_pid, lease_host, lease_heartbeat_at, status"
    " FROM sessions WHERE id = ?"
)


@dataclass(frozen=True, slots=True)
class Holder:
    """The kernel that holds a session's lease, as another kernel sees it."""

    session_id: str
    owner: Owner
    busy: bool
    """It is running a turn (the session is running or awaiting an approval)."""
    alive: bool

    def describe(self, now: float | None = None) -> str:
        """``kernel pid 4242 on host lab-1, heard from 2 s ago``."""
        who = f"kernel pid {self.owner.pid} on host {self.owner.host}"
        if self.owner.heartbeat_at is None:
            return who
        age = max(0.0, (time.time() if now is None else now) - self.owner.heartbeat_at)
        return f"{who}, heard from {age:.0f} s ago"


class LeaseLost(StoreError):
    """Another kernel took the session over: this writer must not write it any more."""

    def __init__(self, message: str, holder: Holder | None = None) -> None:
        super().__init__(message, kind="lease")
        self.holder = holder


def read_holder(
    conn: Conn,
    session_id: str,
    liveness: Liveness,
    lock_row: str = "",
) -> tuple[str | None, Holder]:
    """The session's lease token and its holder (raises when there is no such session).

    ``lock_row`` is the dialect's row lock (``db.dialect.lock_row``) for a caller about to
    decide on the lease inside a write transaction: PostgreSQL runs two kernels'
    transactions at once, so the takeover and the old writer's fence must lock the
    session row to be ordered; SQLite's ``BEGIN IMMEDIATE`` already orders them
    (docs/architecture.md, "Store", its lease subsection)."""
    row = conn.execute(_READ + lock_row, (session_id,)).fetchone()
    if row is None:
        raise StoreError(f"no session {session_id!r} to lease")
    token, pid, host, beat, status = row
    owner = Owner(pid, host, beat)
    alive = token is not None and liveness.is_alive(owner)
    return token, Holder(session_id, owner, status in LIVE_STATUSES, alive)


def delete_unless_held(db: StoreDatabase, session_id: str, liveness: Liveness) -> Holder | None:
    """Delete the session (as :meth:`~.sessions.SessionStore.delete` does) unless a live
    kernel holds its lease or runs it; returns that holder instead. One write transaction,
    so no kernel can take the lease between the check and the delete (the sessions API
    refuses to delete a session a kernel is using)."""
    with db.transaction() as conn:
        _token, holder = read_holder(conn, session_id, liveness, db.dialect.lock_row)
        if holder.alive or holder.busy:
            return holder
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
    return None


@dataclass(eq=False)
class Lease:
    """This kernel's hold on one session; its :meth:`fence` guards the session's writes."""

    session_id: str
    token: str
    liveness: Liveness
    taken_from: Holder | None = None
    """The holder this acquisition took the lease from (dead, or idle with take_over)."""
    stored_messages: int = 0
    """The session's stored messages when it was (last) acquired: a kernel whose agent
    holds a different count continues a conversation another kernel went on with."""
    lost_to: Holder | None = field(default=None, repr=False)
    """Set by the heartbeat (or a fence) once another kernel holds the session."""
    lock_row: str = field(default="", repr=False)
    """The dialect's row lock the fence reads the session row with (see :func:`read_holder`)."""

    def fence(self, conn: Conn) -> None:
        """Raise :class:`LeaseLost` unless this lease still holds the session; called
        inside the write transaction, so the answer holds until it commits."""
        token, holder = read_holder(conn, self.session_id, self.liveness, self.lock_row)
        if token == self.token or self.follow(conn):
            return
        self.lost_to = holder
        who = holder.describe() if token is not None else "no kernel (it was released)"
        raise LeaseLost(
            f"session {self.session_id[:8]} was taken over by {who}; this kernel stopped "
            "writing to it, so what it did since is not saved there",
            holder if token is not None else None,
        )

    def follow(self, conn: Conn) -> bool:
        """Whether the lease moved to another session with its token (a compaction's
        child: the store writer moves it in the transaction that creates the child), and
        follow it there. Tokens are new per acquisition, so only this lease's own move
        can put its token on another row."""
        row = conn.execute(
            "SELECT id FROM sessions WHERE lease_token = ? AND id != ? LIMIT 1",
            (self.token, self.session_id),
        ).fetchone()
        if row is None:
            return False
        self.session_id = str(row[0])
        return True


class LeaseKeeper:
    """The leases of one kernel, and the heartbeat thread that keeps them alive; safe to
    call from any thread. ``path`` is the database: a SQLite file gets a connection of the
    keeper's own (the heartbeat never waits on the writer's lock); an open team store
    (PostgreSQL) is shared, since its pool already gives each thread a connection and 20
    kernels must fit ``max_connections`` (store/pg/connect.py); the keeper never closes it."""

    def __init__(
        self,
        path: str | Path | StoreDatabase,
        *,
        interval: float = HEARTBEAT_S,
        liveness: Liveness | None = None,
        owner: Owner | None = None,
    ) -> None:
        self._owns_db = isinstance(path, (str, Path)) or not path.dialect.is_postgres
        self.db: StoreDatabase
        if isinstance(path, (str, Path)):
            self.db = open_database(path)  # a file, or a team store URL (a pool of its own)
        elif path.dialect.is_postgres:
            self.db = path
        else:
            self.db = Database(path.path)
        self.interval = interval
        self.liveness: Liveness = liveness if liveness is not None else LeaseLiveness()
        self.owner = owner if owner is not None else Owner.this_process()
        self._held: dict[str, Lease] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        atexit.register(self.close)  # a kernel that shuts down cleanly frees its sessions

    def acquire(self, session_id: str, *, take_over: bool = False) -> Lease | Holder:
        """This keeper's lease on the session, or the live holder that keeps it from us
        (always when it runs a turn; when idle unless ``take_over``)."""
        with self.db.transaction() as conn:
            token, holder = read_holder(conn, session_id, self.liveness, self.db.dialect.lock_row)
            count = conn.execute(
                "SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            mine = self._find(session_id, token)
            if mine is not None and token == mine.token:
                self._beat(conn, mine)
                mine.stored_messages = int(count)
                return mine
            taken_from = holder if token is not None else None
            if holder.alive and (holder.busy or not take_over):
                return holder
            lease = Lease(
                session_id,
                uuid.uuid4().hex,
                self.liveness,
                taken_from,
                int(count),
                lock_row=self.db.dialect.lock_row,
            )
            conn.execute(
                "UPDATE sessions SET lease_token = ?, lease_pid = ?, lease_host = ?,"
                " lease_heartbeat_at = ? WHERE id = ?",
                (lease.token, self.owner.pid, self.owner.host, time.time(), session_id),
            )
        self._held[session_id] = lease
        self._start()
        return lease

    def _find(self, session_id: str, token: str | None = None) -> Lease | None:
        """The lease held on ``session_id``, also when a compaction moved it there from
        the session it was taken on (found by its token; re-keyed and followed)."""
        for key, lease in list(self._held.items()):
            if lease.session_id == session_id or (token is not None and lease.token == token):
                if key != session_id:
                    self._held.pop(key, None)
                    self._held[session_id] = lease
                lease.session_id = session_id
                return lease
        return None

    def lease(self, session_id: str) -> Lease | None:
        """The lease this keeper holds on the session (it may since have been lost)."""
        found = self._find(session_id)
        if found is None and self._held:
            row = self.db.conn.execute(
                "SELECT lease_token FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is not None and row[0] is not None:
                found = self._find(session_id, str(row[0]))
        return found

    def release(self, session_id: str) -> None:
        """Give the session up (another kernel may then take it without asking)."""
        lease = self.lease(session_id)
        if lease is not None:
            self._held.pop(session_id, None)
            with self.db.transaction() as conn:
                conn.execute(
                    "UPDATE sessions SET lease_token = NULL, lease_pid = NULL, lease_host = NULL,"
                    " lease_heartbeat_at = NULL WHERE id = ? AND lease_token = ?",
                    (lease.session_id, lease.token),
                )

    def beat(self) -> list[Lease]:
        """Renew every lease held; returns those found lost (another kernel has them)."""
        lost: list[Lease] = []
        with self.db.transaction() as conn:
            for lease in list(self._held.values()):
                if lease.lost_to is None and not self._beat(conn, lease):
                    if lease.follow(conn) and self._beat(conn, lease):
                        continue  # moved to a compaction's child with its token
                    _token, lease.lost_to = read_holder(conn, lease.session_id, self.liveness)
                    lost.append(lease)
        return lost

    @staticmethod
    def _beat(conn: Conn, lease: Lease) -> bool:
        cursor = conn.execute(
            "UPDATE sessions SET lease_heartbeat_at = ? WHERE id = ? AND lease_token = ?",
            (time.time(), lease.session_id, lease.token),
        )
        return bool(cursor.rowcount)

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(
                target=self._run, name="mibyan-lease-heartbeat", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        """Beat until closed. A failed beat (locked, disk full) is skipped, not fatal: the
        heartbeat then ages, which is the truth other kernels should see."""
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as error:  # never let the heartbeat thread die
                _log.debug("lease heartbeat failed: %s", error)

    def close(self) -> None:
        """Stop the heartbeat and release every lease still held (best effort)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for session_id in [lease.session_id for lease in list(self._held.values())]:
            try:
                self.release(session_id)
            except Exception as error:
                _log.debug("could not release the lease of %s: %s", session_id, error)
        if self._owns_db:
            self.db.close()
