"""Opening a new session never stalls the kernel's event loop while another process holds
the database's write lock (docs/architecture.md, "Store", "A writer that recovers and never
blocks the loop"): the busy wait runs on a worker thread; the cell then succeeds, or fails
with one clear line. Real SQLite file, a real second process holding the lock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.options import parse_cell_line
from mibyan_jupyter.jupyter.cell.plan import plan_from_options
from mibyan_jupyter.jupyter.cell.sessions import AgentStoreError, open_session
from mibyan_jupyter.jupyter.defaults import BUILTIN
from mibyan_jupyter.jupyter.state import KernelState, reset_kernel_state

LOCKER = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "conn.execute('ROLLBACK')\n"
)


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


async def worst_stall(work: asyncio.Future[object] | asyncio.Task[object]) -> float:
    """The longest the loop went without running a 5 ms ticker while ``work`` ran."""
    worst, last = 0.0, time.perf_counter()
    while not work.done():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        worst, last = max(worst, now - last - 0.005), now
    return worst


@pytest.fixture
def state(tmp_path: Path) -> Iterator[KernelState]:
    state = reset_kernel_state(str(tmp_path / "sessions.sqlite3"))
    state.store()  # created and migrated before the other process locks it
    yield state
    state.store().close()
    reset_kernel_state()


def new_session_plan() -> CellPlan:
    options = parse_cell_line("--model demo --tools none --session new", BUILTIN)
    return plan_from_options("hello", options, BUILTIN, headless=True)


@pytest.mark.slow
async def test_a_new_session_waits_for_the_lock_off_the_loop(
    state: KernelState, tmp_path: Path
) -> None:
    locker = Locker(tmp_path / "sessions.sqlite3")
    loop = asyncio.get_running_loop()
    loop.call_later(0.8, lambda: loop.run_in_executor(None, locker.release))
    started = time.monotonic()
    task = loop.create_task(open_session(state, new_session_plan(), None))
    stall = await worst_stall(task)
    handle = task.result()
    assert time.monotonic() - started >= 0.7  # it did wait for the lock ...
    assert stall < 0.1, f"the event loop stalled {stall * 1000:.0f} ms"  # ... off the loop
    assert state.store().get(handle.session_id).id == handle.session_id


@pytest.mark.slow
async def test_a_lock_that_stays_fails_with_one_clear_line(
    state: KernelState, tmp_path: Path
) -> None:
    db = state.store().db
    db.lock_retry_seconds = 0.3
    db.conn.execute("PRAGMA busy_timeout=50")
    locker = Locker(tmp_path / "sessions.sqlite3")
    try:
        task = asyncio.get_running_loop().create_task(open_session(state, new_session_plan(), None))
        stall = await worst_stall(task)
        with pytest.raises(AgentStoreError) as caught:
            task.result()
    finally:
        locker.release()
    assert stall < 0.1, f"the event loop stalled {stall * 1000:.0f} ms"
    text = str(caught.value)
    assert "\n" not in text
    assert "stayed locked by another process" in text
    assert state.store().list() == []  # nothing was written
