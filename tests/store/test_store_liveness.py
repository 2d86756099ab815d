"""Whether a session's owner is alive is decided in one place (store/liveness.py), the store
asks it, and opening a session to continue it sweeps for dead owners once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from store_backend import Backend

from mibyan_jupyter.core import ScriptedModel
from mibyan_jupyter.store import Owner, ProcessLiveness, SessionStore, resume
from mibyan_jupyter.store.liveness import pid_alive
from mibyan_jupyter.store.records import insert_session, set_status
from mibyan_jupyter.store.resume import pending_approvals, resume_agent


class CountingLiveness:
    """Says every owner is alive (or those in ``dead``), counting the questions."""

    def __init__(self, dead: set[Owner] | None = None) -> None:
        self.asked: list[Owner] = []
        self.dead = dead or set()

    def is_alive(self, owner: Owner) -> bool:
        self.asked.append(owner)
        return owner not in self.dead

    def take(self) -> int:
        count, self.asked = len(self.asked), []
        return count


@pytest.fixture
def counting() -> CountingLiveness:
    return CountingLiveness()


@pytest.fixture
def store(backend: Backend, counting: CountingLiveness) -> Iterator[SessionStore]:
    with backend.store(liveness=counting) as opened:
        yield opened


def own(store: SessionStore, session_id: str, pid: int, host: str) -> None:
    with store.db.transaction() as conn:
        conn.execute(
            "UPDATE sessions SET status = 'running', owner_pid = ?, owner_host = ? WHERE id = ?",
            (pid, host, session_id),
        )


def finished_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_process_liveness() -> None:
    liveness = ProcessLiveness(host="here")
    assert liveness.is_alive(Owner(os.getpid(), "here"))
    assert not liveness.is_alive(Owner(finished_pid(), "here"))
    assert liveness.is_alive(Owner(finished_pid(), "elsewhere"))  # cannot probe: alive
    assert liveness.is_alive(Owner(None, "here"))
    assert not pid_alive(0)
    assert not pid_alive(-1)
    assert ProcessLiveness().host == socket.gethostname()
    assert Owner.this_process() == Owner(os.getpid(), socket.gethostname())


def test_a_running_session_records_this_process_as_owner(store: SessionStore) -> None:
    sid = store.create().id
    set_status(store.db, sid, "running")
    row = store.db.conn.execute("SELECT owner_pid, owner_host FROM sessions WHERE id = ?", (sid,))
    assert Owner(*row.fetchone()) == Owner.this_process()
    set_status(store.db, sid, "idle")
    row = store.db.conn.execute("SELECT owner_pid, owner_host FROM sessions WHERE id = ?", (sid,))
    assert row.fetchone() == (None, None)


def test_the_store_asks_its_liveness_for_every_live_session(backend: Backend) -> None:
    """Another rule (a lease's heartbeat age, next) plugs in without touching the sweep:
    here owners on another host are judged too, which the process probe cannot do."""
    gone = Owner(4242, "other-host")
    liveness = CountingLiveness(dead={gone})
    with backend.store(liveness=liveness) as store:
        dead, alive, idle = (store.create(t).id for t in ("dead", "alive", "idle"))
        own(store, dead, 4242, "other-host")
        own(store, alive, 4243, "other-host")
        statuses = {s.id: s.status for s in store.list()}
        assert statuses == {dead: "interrupted", alive: "running", idle: "idle"}
        assert sorted(liveness.asked, key=lambda o: o.pid or 0) == [
            gone,
            Owner(4243, "other-host"),
        ]
        assert store.mark_interrupted_if_dead() == []


def test_opening_a_session_sweeps_once(store: SessionStore, counting: CountingLiveness) -> None:
    """One live session owned elsewhere: each sweep asks about it exactly once."""
    busy = store.create("busy").id
    own(store, busy, 4243, "other-host")
    root = store.create("root").id
    child = insert_session(store.db, parent_id=root, link_kind="compression")
    counting.take()

    assert store.resolve(root[:8]).id == child  # type: ignore[union-attr]
    assert counting.take() == 1
    last = store.resolve("last")
    assert last is not None
    assert last.id == child
    assert counting.take() == 1
    _agent, info = resume(store, "last", stream_fn=ScriptedModel())
    assert info.id == child
    assert counting.take() == 1  # resolve, load, attach the writer: one sweep
    _, again = resume_agent(store, info, stream_fn=ScriptedModel())
    assert again == info
    assert counting.take() == 0  # a resolved SessionInfo is not read again
    assert pending_approvals(store, root) == []
    assert counting.take() == 1
    store.get(root)
    store.list()
    assert counting.take() == 2  # every public read still sweeps


def test_resolve_follows_compression_and_knows_when_there_is_nothing(
    store: SessionStore,
) -> None:
    assert store.resolve("last") is None
    assert store.resolve("last", notebook="a.ipynb") is None
    mine = store.create("mine", notebook_path="a.ipynb").id
    store.create("other", notebook_path="b.ipynb")
    continued = insert_session(store.db, parent_id=mine, link_kind="compression")
    found = store.resolve("last", notebook="a.ipynb")
    assert found is not None
    assert found.id == continued
    assert store.resolve(mine) == store.get(continued)
    forked = store.fork(mine).id
    assert store.resolve(forked).id == forked  # type: ignore[union-attr]
