"""One writer per session: the lease (store/lease.py) and its one liveness rule
(store/liveness.py).

A kernel takes a free session's lease, or a dead holder's; an alive holder keeps it
(always while it runs a turn; when idle, unless the newcomer takes it over). The old
holder's next write sees the lease gone and writes nothing. Two real processes on one
SQLite file never interleave their writes, also when the holder is frozen (SIGSTOP, as a
suspended laptop) and taken for dead, then wakes up. A database made by schema 1 migrates
to the lease columns with its rows intact.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from store_backend import Backend

from mibyan_jupyter.core.events import AgentStart, MessageEnd
from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store import (
    Holder,
    Lease,
    LeaseKeeper,
    LeaseLiveness,
    LeaseLost,
    Owner,
    SessionStore,
)
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.db import LATEST, Database
from mibyan_jupyter.store.records import insert_session, load_messages, set_status
from mibyan_jupyter.store.writer import StoreWriter

WORKERS = Path(__file__).parent / "store_workers"


@pytest.fixture
def path(backend: Backend) -> str | Path:
    """The store: a SQLite file, or the team store's URL (tests/store_backend.py)."""
    return backend.target


@pytest.fixture
def session(path: str | Path) -> str:
    db = open_database(path)
    try:
        return insert_session(db, title="shared")
    finally:
        db.close()


@pytest.fixture
def keepers(path: str | Path) -> Iterator[list[LeaseKeeper]]:
    """Two kernels' keepers (one process, two tokens), closed at the end."""
    made = [LeaseKeeper(path, interval=0.05), LeaseKeeper(path, interval=0.05)]
    yield made
    for keeper in made:
        keeper.close()


def lease_row(path: str | Path, session_id: str) -> tuple[object, ...]:
    with closing(open_database(path)) as db:
        return tuple(
            db.conn.execute(
                "SELECT lease_token, lease_pid, lease_host, lease_heartbeat_at FROM sessions"
                " WHERE id = ?",
                (session_id,),
            ).fetchone()
        )


def texts(path: str | Path, session_id: str) -> list[str]:
    with closing(open_database(path)) as db:
        return [str(m.content) for m in load_messages(db, session_id)]


# -- the schema -----------------------------------------------------------------------------


def test_a_schema_1_database_gains_free_leases(tmp_path: Path) -> None:
    from test_store_schema import first_schema_database

    old = tmp_path / "old.sqlite3"
    first_schema_database(old)
    with Database(old) as db:
        assert (
            db.conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        )  # 0002 and every later migration
    assert lease_row(old, "s1") == (None, None, None, None)
    keeper = LeaseKeeper(old)
    try:
        assert isinstance(keeper.acquire("s1"), Lease)  # migrated: leasable at once
        assert lease_row(old, "s1")[1] == os.getpid()
    finally:
        keeper.close()
    assert lease_row(old, "s1") == (None, None, None, None)


# -- liveness: one rule ---------------------------------------------------------------------


def test_liveness_is_the_heartbeat_age() -> None:
    now = [1000.0]
    rule = LeaseLiveness(10.0, host="here", clock=lambda: now[0])
    me = os.getpid()
    assert rule.is_alive(Owner(me, "here", 995.0))
    assert rule.is_alive(Owner(me, "here", 990.0))
    assert not rule.is_alive(Owner(me, "here", 989.0))  # a live process, a hung kernel
    assert rule.is_alive(Owner(me, "here", 2000.0))  # a clock ahead of ours: young
    assert rule.is_alive(Owner(4242, "elsewhere", 999.0))  # another host: the beat decides
    assert not rule.is_alive(Owner(4242, "elsewhere", 900.0))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not rule.is_alive(Owner(gone.pid, "here", 999.0))  # gone from this host: at once
    assert rule.is_alive(Owner(me, "here", None))  # no heartbeat: the process probe
    assert not rule.is_alive(Owner(gone.pid, "here", None))
    assert LeaseLiveness().host == socket.gethostname()


def test_the_sweep_judges_a_running_session_by_its_lease(path: str | Path, session: str) -> None:
    """A running session whose kernel process is alive but whose heartbeat stopped (a
    frozen kernel) is interrupted; its heartbeat is the lease's, same process."""
    with closing(open_database(path)) as db:
        set_status(db, session, "running")
        db.conn.execute(
            "UPDATE sessions SET lease_token = 't', lease_pid = ?, lease_host = ?,"
            " lease_heartbeat_at = ? WHERE id = ?",
            (os.getpid(), socket.gethostname(), time.time() - 60, session),
        )
    with SessionStore(path, liveness=LeaseLiveness(15.0)) as store:
        assert store.get(session).status == "interrupted"


# -- taking, keeping and losing a lease ------------------------------------------------------


def test_a_free_session_is_taken_and_kept(
    path: str | Path, session: str, keepers: list[LeaseKeeper]
) -> None:
    mine, other = keepers
    lease = mine.acquire(session)
    assert isinstance(lease, Lease)
    assert lease.taken_from is None
    token, pid, host, beat = lease_row(path, session)
    assert (token, pid, host) == (lease.token, os.getpid(), socket.gethostname())
    assert time.time() - float(beat) < 5  # type: ignore[arg-type]
    assert mine.acquire(session) is lease  # again: the same lease, its writer stays valid
    held = other.acquire(session)
    assert isinstance(held, Holder)
    assert (held.alive, held.busy) == (True, False)
    assert held.describe().startswith(f"kernel pid {os.getpid()} on host ")
    time.sleep(0.3)  # the heartbeat thread renews it
    assert float(lease_row(path, session)[3]) > float(beat)  # type: ignore[arg-type]


def test_a_holder_running_a_turn_keeps_it_even_against_take_over(
    path: str | Path, session: str, keepers: list[LeaseKeeper]
) -> None:
    mine, other = keepers
    assert isinstance(mine.acquire(session), Lease)
    with closing(open_database(path)) as db:
        set_status(db, session, "awaiting_approval")
    held = other.acquire(session, take_over=True)
    assert isinstance(held, Holder)
    assert held.busy
    assert held.alive


async def test_taking_over_an_idle_holder_fences_its_writes(
    path: str | Path, session: str, keepers: list[LeaseKeeper]
) -> None:
    old_kernel, new_kernel = keepers
    old = old_kernel.acquire(session)
    assert isinstance(old, Lease)
    with closing(open_database(path)) as db_old, closing(open_database(path)) as db_new:
        writer = StoreWriter(db_old, session, fence=old.fence)
        await writer(MessageEnd(message=UserMessage(content="old 0")))
        assert writer.error is None
        new = new_kernel.acquire(session, take_over=True)
        assert isinstance(new, Lease)
        assert new.taken_from is not None
        assert new.taken_from.owner.pid == os.getpid()
        assert new.stored_messages == 1
        theirs = StoreWriter(db_new, session, fence=new.fence)
        await theirs(MessageEnd(message=UserMessage(content="new 0")))
        await writer(AgentStart())  # the old kernel's next write
        await writer(MessageEnd(message=UserMessage(content="old 1")))
        assert isinstance(writer.error, LeaseLost)
        assert writer.stopped is writer.error
        assert "taken over by kernel pid" in str(writer.error)
        news = writer.take_news()
        assert len(news) == 1  # one clear line
        assert "stopped writing" in news[0]
        await theirs(MessageEnd(message=UserMessage(content="new 1")))
        assert theirs.error is None
    assert texts(path, session) == ["old 0", "new 0", "new 1"]
    with closing(open_database(path)) as db:
        assert db.conn.execute("SELECT status FROM sessions").fetchone()[0] == "idle"
    await asyncio.sleep(0.2)  # the old kernel's heartbeat finds the lease gone
    assert old_kernel.lease(session) is not None
    assert old_kernel.lease(session).lost_to is not None  # type: ignore[union-attr]


def test_a_dead_holder_is_taken_over_without_asking(path: str | Path, session: str) -> None:
    with closing(open_database(path)) as db:
        set_status(db, session, "running")
        db.conn.execute(
            "UPDATE sessions SET lease_token = 'gone', lease_pid = 4242, lease_host = 'far',"
            " lease_heartbeat_at = ? WHERE id = ?",
            (time.time() - 3600, session),
        )
    keeper = LeaseKeeper(path)
    try:
        lease = keeper.acquire(session)
        assert isinstance(lease, Lease)
        assert lease.taken_from is not None
        assert (lease.taken_from.alive, lease.taken_from.busy) == (False, True)
        assert lease.taken_from.owner == Owner(4242, "far", lease.taken_from.owner.heartbeat_at)
    finally:
        keeper.close()


def test_release_and_close_free_the_session(
    path: str | Path, session: str, keepers: list[LeaseKeeper]
) -> None:
    mine, other = keepers
    assert isinstance(mine.acquire(session), Lease)
    mine.release(session)
    assert lease_row(path, session) == (None, None, None, None)
    assert isinstance(other.acquire(session), Lease)
    other.close()
    assert lease_row(path, session) == (None, None, None, None)
    other.close()  # twice is fine


# -- two real processes ---------------------------------------------------------------------


def start(
    path: str | Path, session: str, name: str, count: int, *flags: str
) -> subprocess.Popen[str]:
    env = {**os.environ, "MIBYAN_LEASE_HEARTBEAT_S": "0.1", "MIBYAN_LEASE_STALE_S": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKERS / "lease_writer.py"),
            str(path),
            session,
            name,
            str(count),
            *flags,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_until(proc: subprocess.Popen[str], prefix: str, lines: list[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no {prefix!r} line; got {lines}; stderr: {proc.stderr.read()}")  # type: ignore[union-attr]


def go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def finish(proc: subprocess.Popen[str], lines: list[str]) -> list[str]:
    out, err = proc.communicate(timeout=60)
    lines += out.splitlines(keepends=True)
    assert proc.returncode == 0, err
    return [line.strip() for line in lines]


def assert_not_interleaved(found: list[str], a_wrote: int) -> None:
    """Every message of A that A was told is durable, then only B's: no A after a B."""
    names = [text.split()[0] for text in found]
    assert names == ["A"] * names.count("A") + ["B"] * names.count("B"), found
    assert names.count("A") == a_wrote
    assert [text for text in found if text.startswith("B")] == [f"B {i}" for i in range(5)]


@pytest.mark.slow  # two processes, a take-over, ~2 s
def test_two_processes_one_takes_over_the_other_stops_writing(
    path: str | Path, session: str
) -> None:
    a_lines: list[str] = []
    a = start(path, session, "A", 400)
    read_until(a, "ready", a_lines)
    go(a)
    for _ in range(5):
        read_until(a, "wrote", a_lines)
    b_lines: list[str] = []
    refused = start(path, session, "B", 5)  # without take_over: told who holds it
    assert finish(refused, b_lines)[0].startswith("held kernel pid")
    b = start(path, session, "B", 5, "take_over")
    read_until(b, "ready", b_lines)
    go(b)
    b_out = finish(b, b_lines)
    a_out = finish(a, a_lines)
    assert [line for line in b_out if line.startswith("wrote")] == [f"wrote {i}" for i in range(5)]
    lost = [line for line in a_out if line.startswith("lost")]
    assert len(lost) == 1, a_out
    assert "taken over by kernel pid" in lost[0]
    a_wrote = len([line for line in a_out if line.startswith("wrote")])
    assert 5 <= a_wrote < 400
    assert_not_interleaved(texts(path, session), a_wrote)


@pytest.mark.slow  # a frozen process taken for dead after 1 s, then woken: ~3 s
def test_a_frozen_holder_taken_for_dead_wakes_up_and_writes_nothing(
    path: str | Path, session: str
) -> None:
    a_lines: list[str] = []
    a = start(path, session, "A", 400, "running")
    read_until(a, "ready", a_lines)
    go(a)
    for _ in range(3):
        read_until(a, "wrote", a_lines)
    os.kill(a.pid, signal.SIGSTOP)  # between two writes: it sleeps after each
    try:
        time.sleep(1.6)  # its heartbeat is now older than MIBYAN_LEASE_STALE_S
        b_lines: list[str] = []
        b = start(path, session, "B", 5)  # no take_over needed: the holder is dead
        read_until(b, "ready", b_lines)
        go(b)
        b_out = finish(b, b_lines)
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a_out = finish(a, a_lines)
    assert [line for line in b_out if line.startswith("wrote")] == [f"wrote {i}" for i in range(5)]
    assert len([line for line in a_out if line.startswith("lost")]) == 1, a_out
    a_wrote = len([line for line in a_out if line.startswith("wrote")])
    assert_not_interleaved(texts(path, session), a_wrote)
