"""Whether a session's owner is alive: the one place that decides, and the one sweep that
turns the sessions of dead owners into ``interrupted``.

Why it matters: a kernel that dies cannot say so, so a session it was running stays marked
``running`` (or ``awaiting_approval``) until someone decides its owner is gone; and a
kernel that wants to write a session another kernel holds must know whether that kernel is
still there (docs/architecture.md, "Store"). Both questions are answered here, by
:class:`LeaseLiveness` (the store's default): a kernel's heartbeat thread renews its
leases every few seconds (:mod:`.lease`), and an owner is alive while its heartbeat is
younger than :data:`STALE_S`. An owner on this host whose process is gone is dead at once;
an owner that never had a heartbeat (a session written by the plain Python API, or by
schema 1) is judged by :class:`ProcessLiveness`, the process probe."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.scope import user_scope

LIVE_STATUSES = ("running", "awaiting_approval")
"""Statuses that claim an owner is working on the session right now."""


def env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment (tests shorten the lease)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


STALE_S = env_seconds("MIBYAN_LEASE_STALE_S", 15.0)
"""A heartbeat older than this means its kernel is gone (or hung: a suspended laptop, a
stopped process). Five beats of :data:`~.lease.HEARTBEAT_S` at least, so a kernel busy
in a long C call (its heartbeat thread then waits for the GIL) is not taken for dead."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds a session: the process ``pid`` on ``host`` that marked it live or leased
    it, and when it last said it is alive (``heartbeat_at``, epoch seconds; ``None`` when
    it keeps no heartbeat)."""

    pid: int | None
    host: str | None
    heartbeat_at: float | None = None

    @classmethod
    def this_process(cls) -> Owner:
        """The owner this process writes when it marks a session live."""
        return cls(os.getpid(), socket.gethostname())


class Liveness(Protocol):
    """Decides whether an owner is alive. Unsure must mean alive: a live session wrongly
    marked interrupted is worse than a dead one shown running a little longer."""

    def is_alive(self, owner: Owner) -> bool: ...


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists; unsure means alive (never mark a
    running session interrupted by mistake). Windows has no harmless probe: always True."""
    if pid == os.getpid() or sys.platform == "win32":
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    return True


class ProcessLiveness:
    """An owner on this host is alive while its process exists; an owner on another host,
    or without a pid, cannot be probed from here and counts as alive."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host if host is not None else socket.gethostname()

    def is_alive(self, owner: Owner) -> bool:
        if owner.pid is None or owner.host != self.host:
            return True
        return pid_alive(owner.pid)


class LeaseLiveness:
    """The one rule: an owner is alive while its heartbeat is younger than
    ``stale_after`` seconds (a heartbeat from the future, a skewed clock, counts as
    young); dead at once when it is on this host and its process is gone; without a
    heartbeat, ``fallback`` decides (default: :class:`ProcessLiveness`)."""

    def __init__(
        self,
        stale_after: float | None = None,
        *,
        host: str | None = None,
        clock: Callable[[], float] = time.time,
        fallback: Liveness | None = None,
    ) -> None:
        self.stale_after = STALE_S if stale_after is None else stale_after
        self.host = host if host is not None else socket.gethostname()
        self.clock = clock
        self.fallback: Liveness = fallback if fallback is not None else ProcessLiveness(self.host)

    def is_alive(self, owner: Owner) -> bool:
        if owner.heartbeat_at is None:
            return self.fallback.is_alive(owner)
        if owner.pid is not None and owner.host == self.host and not pid_alive(owner.pid):
            return False
        return self.clock() - owner.heartbeat_at <= self.stale_after


def interrupt_dead_owners(db: StoreDatabase, liveness: Liveness) -> list[str]:
    """The user's sessions live (running or awaiting approval) under an owner ``liveness``
    calls dead become ``interrupted``; returns their ids. ``updated_at`` is kept, so an
    old crash does not become the "last" session. Each update re-checks the owner inside
    the write lock: another kernel may have taken the session over since the read. The
    owner's heartbeat is its lease's, when the lease is held by the same process. Only
    the user's own (store/scope.py): on the team store an instructor reads the students'
    sessions but may change none, and each student's own reads sweep theirs."""
    mine, whose = user_scope(db).clause()
    rows = db.conn.execute(
        "SELECT id, owner_pid, owner_host, CASE WHEN lease_pid IS NOT DISTINCT FROM owner_pid"
        " AND lease_host IS NOT DISTINCT FROM owner_host THEN lease_heartbeat_at END"
        f" FROM sessions s WHERE status IN (?, ?) AND {mine}",
        (*LIVE_STATUSES, *whose),
    ).fetchall()
    dead = [
        (session_id, pid, host)
        for session_id, pid, host, beat in rows
        if not liveness.is_alive(Owner(pid, host, beat))
    ]
    if not dead:
        return []
    changed = []
    with db.transaction() as conn:
        for session_id, pid, host in dead:
            cursor = conn.execute(
                "UPDATE sessions SET status = 'interrupted', end_reason = 'interrupted',"
                " owner_pid = NULL, owner_host = NULL WHERE id = ? AND status IN (?, ?)"
                " AND owner_pid IS NOT DISTINCT FROM ? AND owner_host IS NOT DISTINCT FROM ?",
                (session_id, *LIVE_STATUSES, pid, host),
            )
            if cursor.rowcount > 0:
                changed.append(session_id)
    return changed
