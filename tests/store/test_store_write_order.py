"""Writes on the team store (PostgreSQL) that must be ordered or must not repeat.

* The session row's lock orders a take-over and the old writer's next write: SQLite's
  ``BEGIN IMMEDIATE`` makes every write transaction wait for the one before; on
  PostgreSQL two kernels' transactions run at once, so the fence and the take-over both
  read the session row ``FOR UPDATE``. The tests hold one side's transaction open and see
  the other wait for it (in ``pg_stat_activity``), then check who wrote what.
* A write tried again after its commit landed (a connection lost at the commit hides it)
  stores nothing twice: on both backends (tests/store_backend.py).

docs/architecture.md, "Store" (its lease subsection and its writer that recovers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgTestDb
from store_backend import Backend

from mibyan_jupyter.core import AssistantMessage, Usage
from mibyan_jupyter.core.events import MessageEnd
from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store import Lease, LeaseKeeper, LeaseLost, writer_ops
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.records import insert_session, load_messages
from mibyan_jupyter.store.writer import StoreWriter

MODEL = "fake:order"


@pytest.fixture
def db(backend: Backend) -> Iterator[StoreDatabase]:
    database = open_database(backend.target)
    yield database
    database.close()


def texts(path: str | Path, session_id: str) -> list[str]:
    with closing(open_database(path)) as db:
        return [str(m.content) for m in load_messages(db, session_id)]


def wait_for_lock_waiter(admin: Any, database: str, timeout: float = 10.0) -> None:
    """Until a backend of ``database`` waits for a row lock on ``sessions``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND wait_event_type = 'Lock' AND query ILIKE %s",
            (database, "%FROM sessions WHERE id = % FOR UPDATE%"),
        ).fetchone()[0]
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("nobody waited for the session row's lock")


@pytest.fixture
def pg_store(pg_db: PgTestDb) -> tuple[PgTestDb, str, str]:
    """A team store with one student's session: (the database, its URL, the session)."""
    url = pg_db.url(pg_db.user("kernel").name)
    with closing(open_database(url)) as db:
        session_id = insert_session(db, title="shared")
    return pg_db, url, session_id


async def test_a_take_over_in_flight_makes_the_old_writers_next_write_wait_and_fail(
    pg_store: tuple[PgTestDb, str, str],
) -> None:
    pg, url, session_id = pg_store
    old_kernel = LeaseKeeper(url, interval=60)
    with closing(open_database(url)) as db_old, closing(open_database(url)) as db_new:
        new_kernel = LeaseKeeper(db_new, interval=60)  # shares db_new's pool
        try:
            old = old_kernel.acquire(session_id)
            assert isinstance(old, Lease)
            writer = StoreWriter(db_old, session_id, fence=old.fence, patience=0.2)
            await writer(MessageEnd(message=UserMessage(content="old 0")))
            assert writer.error is None
            with db_new.transaction():  # the take-over, not committed yet
                new = new_kernel.acquire(session_id, take_over=True)
                assert isinstance(new, Lease)
                await writer(MessageEnd(message=UserMessage(content="old 1")))
                wait_for_lock_waiter(pg.admin(), pg.name)  # the old writer's fence waits
                assert writer.stopped is None
            assert writer.drain(10)
            assert isinstance(writer.stopped, LeaseLost)
        finally:
            new_kernel.close()
            old_kernel.close()
        assert texts(url, session_id) == ["old 0"]


async def test_a_write_in_flight_makes_the_take_over_wait_and_see_it(
    pg_store: tuple[PgTestDb, str, str],
) -> None:
    pg, url, session_id = pg_store
    old_kernel, new_kernel = LeaseKeeper(url, interval=60), LeaseKeeper(url, interval=60)
    inside, release = threading.Event(), threading.Event()
    with closing(open_database(url)) as db_old:
        try:
            old = old_kernel.acquire(session_id)
            assert isinstance(old, Lease)
            writer = StoreWriter(db_old, session_id, fence=old.fence, patience=0.2)
            write_one = writer_ops.message(session_id, UserMessage(content="old 0"), print)

            def held(conn: Conn) -> Callable[[], None] | None:
                after = write_one(conn)
                inside.set()
                release.wait(10)  # the fence ran: the row is locked until this commits
                return after

            writer.write(held)
            assert inside.wait(10)
            with ThreadPoolExecutor(1) as pool:
                taking = pool.submit(new_kernel.acquire, session_id, take_over=True)
                wait_for_lock_waiter(pg.admin(), pg.name)
                assert not taking.done()
                release.set()
                new = taking.result(timeout=10)
            assert isinstance(new, Lease)
            assert new.stored_messages == 1  # it saw the write that was in flight
            assert writer.drain(10)
            await writer(MessageEnd(message=UserMessage(content="old 1")))
            assert writer.drain(10)
            assert isinstance(writer.stopped, LeaseLost)
        finally:
            release.set()
            new_kernel.close()
            old_kernel.close()
    assert texts(url, session_id) == ["old 0"]


def test_a_write_tried_again_after_its_commit_landed_stores_nothing_twice(
    db: StoreDatabase,
) -> None:
    """A lost connection can hide a commit that landed (the team store): the lane tries
    the write again, and the message (with its ledger row) must still be stored once."""
    session_id = insert_session(db, model=MODEL)
    told: list[int] = []
    prompt = writer_ops.message(session_id, UserMessage(content="hi"), told.append)
    reply = writer_ops.assistant(
        session_id,
        AssistantMessage(content="hello", usage=Usage(input=3, output=1)),
        told.append,
        requested=MODEL,
        provider="fake",
        latency_ms=1.0,
        retries=0,
        fallback_from=None,
    )
    for op in (prompt, prompt, reply, reply):  # each committed, then tried again
        with db.transaction() as conn:
            after = op(conn)
        assert after is not None
        after()
    assert told == [0, 0, 1, 1]
    assert [m.role for m in load_messages(db, session_id)] == ["user", "assistant"]
    ledger = db.conn.execute(
        "SELECT count(*) FROM usage_ledger WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    assert ledger == 1


def test_a_compaction_tried_again_after_its_commit_landed_makes_one_child(
    db: StoreDatabase,
) -> None:
    parent = insert_session(db, model=MODEL)
    moved: list[str] = []
    kept = (UserMessage(content="go"), AssistantMessage(content="[Summary]"))
    op = writer_ops.compaction(parent, "child-1", kept, lambda: moved.append("child-1"))
    for _ in range(2):  # committed, then tried again
        with db.transaction() as conn:
            after = op(conn)
        assert after is not None
        after()
    assert moved == ["child-1", "child-1"]
    assert [m.role for m in load_messages(db, "child-1")] == ["user", "assistant"]
    children = db.conn.execute(
        "SELECT count(*) FROM sessions WHERE parent_id = ?", (parent,)
    ).fetchone()[0]
    assert children == 1
