"""Whether a session's owner is alive: the one place that decides, and the one sweep that
turns the sessions of dead owners into ``interrupted``.

Why it matters: a kernel that dies cannot say so, so a session it was running stays marked
``running`` (or ``awaiting_approval``) until someone decides its owner is gone. Today the
decision is a process probe: the owner is the kernel process (pid on a host) that marked the
session running, alive while that pid exists on this host. The next step is a lease kept by
a heartbeat (docs/architecture.md, "Store"): :class:`Owner` already carries the heartbeat
time and :class:`Liveness` is the seam, so a ``LeaseLiveness`` judging the heartbeat's age
replaces :class:`ProcessLiveness` without touching the sweep or its callers.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from typing import Protocol

from mibyan_jupyter.store.db import Database

LIVE_STATUSES = ("running", "awaiting_approval")
"""Statuses that claim an owner is working on the session right now."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds a session: the process ``pid`` on ``host`` that marked it live, and when it
    last said it is alive (``heartbeat_at``, epoch seconds; ``None`` until leases exist)."""

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


def interrupt_dead_owners(db: Database, liveness: Liveness) -> list[str]:
    """Sessions live (running or awaiting approval) under an owner ``liveness`` calls dead
    become ``interrupted``; returns their ids. ``updated_at`` is kept, so an old crash does
    not become the "last" session. Each update re-checks the owner inside the write lock:
    another kernel may have taken the session over since the read."""
    rows = db.conn.execute(
        "SELECT id, owner_pid, owner_host FROM sessions WHERE status IN (?, ?)", LIVE_STATUSES
    ).fetchall()
    dead = [
        (session_id, pid, host)
        for session_id, pid, host in rows
        if not liveness.is_alive(Owner(pid, host))
    ]
    if not dead:
        return []
    with db.transaction() as conn:
        for session_id, pid, host in dead:
            conn.execute(
                "UPDATE sessions SET status = 'interrupted', end_reason = 'interrupted',"
                " owner_pid = NULL, owner_host = NULL WHERE id = ? AND status IN (?, ?)"
                " AND owner_pid IS ? AND owner_host IS ?",
                (session_id, *LIVE_STATUSES, pid, host),
            )
    return [session_id for session_id, _, _ in dead]
