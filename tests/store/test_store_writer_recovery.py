"""The store writer recovers when the cause of a failure goes away, and never blocks the
kernel's event loop on the way.

* A write lock held by another process for the whole run: the run goes on, the event
  loop never stalls for more than ~50 ms (the busy wait runs on the writer's thread), the
  user gets one line when writing fails, and once the lock is released the writer catches
  up (every message, tool call, ledger row and the final status, in order) and says so in
  one more line.
* A full disk (SQLite's size cap fails writes exactly as a full disk does) that is freed:
  the same catch-up, and nothing is written out of order meanwhile.
* A read-only file and a database locked by another process give one clear line naming
  the file and the cause.
* On the team store (PostgreSQL), the server ending the writer's connections again and
  again mid-run (``pg_terminate_backend``, as a restart or a network cut does) is a failure
  that passes ("io"): the writes are kept in order and caught up, none lost or doubled.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgTestDb

from mibyan_jupyter.core import Agent, Call, Reply, ScriptedModel, tool
from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.records import insert_session, load_messages
from mibyan_jupyter.store.writer import StoreWriter

MODEL = "fake:recovery"
LOCKER = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "conn.execute('ROLLBACK')\n"
)


@tool(side_effects=False)
def read(path: str) -> str:
    """Read a file.

    Args:
        path: which file.
    """
    return f"contents of {path}"


def script() -> list[Reply]:
    return [
        Reply(
            text="Reading both.", calls=[Call("read", {"path": "a"}), Call("read", {"path": "b"})]
        ),
        Reply(text="x" * 20_000),  # large enough to need new pages
    ]


class Locker:
    """Another process holding the database's write lock until released."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.communicate("go\n", timeout=30)


@pytest.fixture
def locker_factory() -> Iterator[Callable[[Path], Locker]]:
    made: list[Locker] = []

    def make(path: Path) -> Locker:
        made.append(Locker(path))
        return made[-1]

    yield make
    for locker in made:
        locker.release()


class LoopLag:
    """The longest the event loop went without running a 5 ms ticker."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last - 0.005)
            last = now

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


def complete(db: Database, session_id: str, agent: Agent) -> None:
    """The store holds the whole run: messages, tool calls, ledger, final status."""
    assert load_messages(db, session_id) == agent.state.messages
    calls = db.conn.execute("SELECT status FROM tool_calls WHERE session_id = ?", (session_id,))
    assert [row[0] for row in calls] == ["done", "done"]
    ledger = db.conn.execute(
        "SELECT count(*) FROM usage_ledger WHERE session_id = ?", (session_id,)
    )
    assert ledger.fetchone()[0] == sum(m.role == "assistant" for m in agent.state.messages) == 2
    row = db.conn.execute("SELECT status, end_reason FROM sessions WHERE id = ?", (session_id,))
    assert row.fetchone() == ("idle", "completed")


@pytest.mark.slow  # a real second process holds the lock for seconds
async def test_a_lock_held_by_another_process_then_released(
    tmp_path: Path, locker_factory: Callable[[Path], Locker]
) -> None:
    path = tmp_path / "s.sqlite3"
    with Database(path) as db:  # the default busy wait (5 s) and retry window (30 s)
        session_id = insert_session(db, model=MODEL)
        locker = locker_factory(path)
        agent = Agent(stream_fn=ScriptedModel(script()), model=MODEL, tools=[read])
        writer = StoreWriter(db, session_id, patience=0.1, retry=(0.1,))
        agent.subscribe(writer)
        with LoopLag() as lag:
            began = time.perf_counter()
            await agent.prompt("read a and b")
            took = time.perf_counter() - began
        assert agent.state.last_end_reason == "completed"
        assert took < 2.0  # waited once for patience, not once per write
        assert writer.error is not None
        assert "locked" in str(writer.error)
        assert str(path) in str(writer.error)
        (failed,) = writer.take_news()
        assert failed.startswith("the session store failed: ")
        assert load_messages(db, session_id) == []  # nothing could be written yet
        locker.release()
        assert writer.drain(timeout=20)
        assert writer.error is None
        (recovered,) = writer.take_news()
        assert recovered.startswith("the session store recovered: ")
        complete(db, session_id, agent)
        assert writer.last_seq == len(agent.state.messages) - 1
    print(f"worst event-loop stall while locked: {lag.worst * 1000:.1f} ms")
    assert lag.worst < 0.05, f"the event loop stalled {lag.worst * 1000:.0f} ms"


async def test_a_lock_beyond_the_retry_window_is_retried_until_it_goes(
    tmp_path: Path, locker_factory: Callable[[Path], Locker]
) -> None:
    path = tmp_path / "s.sqlite3"
    with Database(path, busy_timeout=0.02, lock_retry_seconds=0.1) as db:
        session_id = insert_session(db, model=MODEL)
        locker = locker_factory(path)
        agent = Agent(stream_fn=ScriptedModel(script()), model=MODEL, tools=[read])
        writer = StoreWriter(db, session_id, retry=(0.1,))
        agent.subscribe(writer)
        await agent.prompt("read a and b")
        assert writer.error is not None
        assert "stayed locked by another process" in str(writer.error)
        await asyncio.sleep(0.5)  # several attempts fail: still one line
        assert len(writer.take_news()) == 1
        locker.release()
        assert writer.drain(timeout=20)
        assert writer.error is None
        assert len(writer.take_news()) == 1
        complete(db, session_id, agent)


async def test_a_full_disk_that_is_freed(tmp_path: Path) -> None:
    with Database(tmp_path / "s.sqlite3") as db:
        session_id = insert_session(db, model=MODEL)
        pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
        db.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        agent = Agent(stream_fn=ScriptedModel(script()), model=MODEL, tools=[read])
        writer = StoreWriter(db, session_id, retry=(0.1,))
        agent.subscribe(writer)
        await agent.prompt("read a and b")
        assert writer.error is not None
        assert "the disk is full" in str(writer.error)
        stored = load_messages(db, session_id)
        assert 0 < len(stored) < len(agent.state.messages)
        assert stored == agent.state.messages[: len(stored)]  # a prefix, nothing out of order
        with db.lock:  # the writer's thread shares the connection
            db.conn.execute("PRAGMA max_page_count = 1000000")
        assert writer.drain(timeout=20)
        assert writer.error is None
        assert [line.split(":")[0] for line in writer.take_news()] == [
            "the session store failed",
            "the session store recovered",
        ]
        complete(db, session_id, agent)


# -- one clear line -------------------------------------------------------------------------


def make_read_only(path: Path) -> Callable[[], None]:
    """Make ``path`` read-only for real (also for root, with the immutable attribute);
    returns how to undo it. Skips where neither works."""
    os.chmod(path, 0o444)
    if not os.access(path, os.W_OK):
        return lambda: os.chmod(path, 0o644)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
        os.chmod(path, 0o644)
        pytest.skip("cannot make a file read-only here (root without chattr)")

    def undo() -> None:
        subprocess.run([chattr, "-i", str(path)], check=True)
        os.chmod(path, 0o644)

    return undo


async def test_a_read_only_file_gives_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with Database(path) as db:
        session_id = insert_session(db, model=MODEL)
    undo = make_read_only(path)
    try:
        with SessionStore(path) as store:
            assert store.get(session_id).id == session_id  # reading still works
            with pytest.raises(StoreError) as caught:
                store.create("new")
            assert caught.value.kind == "read-only"
            assert str(caught.value).startswith(f"cannot write to {path}: the file is read-only")
            assert "\n" not in str(caught.value)
            agent = Agent(stream_fn=ScriptedModel(["Hello."]), model=MODEL)
            writer = StoreWriter(store.db, session_id, retry=(0.1,))
            agent.subscribe(writer)
            await agent.prompt("hi")
            assert agent.state.last_end_reason == "completed"
            (line,) = writer.take_news()
            assert f"cannot write to {path}: the file is read-only" in line
            writer.close()
    finally:
        undo()


def test_a_locked_database_gives_one_clear_line(
    tmp_path: Path, locker_factory: Callable[[Path], Locker]
) -> None:
    path = tmp_path / "s.sqlite3"
    Database(path).close()
    locker_factory(path)
    with Database(path, busy_timeout=0.02, lock_retry_seconds=0.1) as db:
        with pytest.raises(StoreError) as caught:
            SessionStore(db).create("new")
        assert caught.value.kind == "locked"
        assert str(caught.value) == (
            f"{path} stayed locked by another process for 0.1 s; nothing was written"
        )
    assert sqlite3.connect(path).execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


# -- the team store (PostgreSQL): a lost connection passes ----------------------------------


def long_script(turns: int) -> list[Reply]:
    """``turns`` replies of two tool calls each, then a last answer: ~5 writes a turn."""
    replies = [
        Reply(
            text=f"Step {n}.", calls=[Call("read", {"path": f"a{n}"}), Call("read", {"path": "b"})]
        )
        for n in range(turns)
    ]
    return [*replies, Reply(text="Done.")]


class Terminator:
    """The server ends every connection of one role, again and again, as a restart or
    a network cut does, from the superuser's own connection (``pg_terminate_backend``)."""

    def __init__(self, admin: Any, role: str, every: float) -> None:
        self.admin, self.role, self.every = admin, role, every
        self.killed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            rows = self.admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (self.role,),
            ).fetchall()
            self.killed += sum(1 for (done,) in rows if done)

    def __enter__(self) -> Terminator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


async def test_connections_terminated_mid_run_are_caught_up_in_order(pg_db: PgTestDb) -> None:
    user = pg_db.user("kernel")
    db = open_database(pg_db.url(user.name))
    try:
        session_id = insert_session(db, model=MODEL)
        model = ScriptedModel(long_script(12), chunk_size=4, delay=0.002)
        agent = Agent(stream_fn=model, model=MODEL, tools=[read])
        writer = StoreWriter(db, session_id, retry=(0.05,))
        agent.subscribe(writer)
        with Terminator(pg_db.admin(), user.name, every=0.03) as terminator:
            await agent.prompt("read them all")
        assert agent.state.last_end_reason == "completed"
        assert writer.drain(timeout=30)
        assert writer.error is None
        assert writer.stopped is None
        assert terminator.killed > 0
        news = writer.take_news()
        assert news, "no write ever failed: the terminations missed the writer"
        assert all(line.startswith("the session store") for line in news)
        assert news[-1].startswith("the session store recovered")
        assert "the connection to the server was lost" in news[0]
        print(f"\n{terminator.killed} connections terminated; the writer said: {news}")
        stored = load_messages(db, session_id)  # every message, in order, none twice
        assert stored == agent.state.messages
        rows = db.conn.execute(
            "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        assert [seq for (seq,) in rows] == list(range(len(agent.state.messages)))
        calls = db.conn.execute(
            "SELECT count(*) FROM tool_calls WHERE session_id = ? AND status = 'done'",
            (session_id,),
        ).fetchone()[0]
        assert calls == 24
        final = db.conn.execute(
            "SELECT status, end_reason FROM sessions WHERE id = ?", (session_id,)
        )
        assert final.fetchone() == ("idle", "completed")
    finally:
        db.close()
