"""One writer per session, in two real kernels on one session database.

* Kernel B opens a session kernel A holds (idle): B's cell asks on its view; with no front
  end to click, the documented answer, fork, is taken: B continues in a fork, A's session
  is untouched.
* B answers the card with "Take it over": B writes the session; A's next cell is told the
  session was taken over and (headless again) continues in a fork of its own.
* A lock another process holds while a reply streams: one line in the cell when writing
  fails, one in the next cell once the kept writes have landed.
* A waits for an approval when it freezes (SIGSTOP) long enough to be taken for dead; B
  takes the session over without asking and runs; A wakes, the click comes, and A's next
  write is refused: one clear line in A's cell, and nothing of A's lands in the session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_driver import Execution, KernelDriver

from mibyan_jupyter.core.transcript import ModelView, validate_transcript
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.resume import repair
from mibyan_jupyter.store.sessions import SessionStore

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(180)]

FAST_LEASE = {"MIBYAN_LEASE_HEARTBEAT_S": "0.2", "MIBYAN_LEASE_STALE_S": "2"}
HELLO = "%%agent --tools none\nSay hello."
RUN_PYTHON_CELL = "%%agent --tools python\nUse run_python to compute:\n```python\nprint(6 * 7)\n```"


def start(workdir: Path) -> KernelDriver:
    driver = KernelDriver(workdir, env=FAST_LEASE)
    assert (driver.run("%load_ext mibyan_jupyter").reply or {})["status"] == "ok"
    driver.run("%config AgentMagics.headless_wait = 0.5")
    return driver


@pytest.fixture
def kernels(tmp_path: Path) -> Iterator[tuple[KernelDriver, KernelDriver]]:
    a = start(tmp_path)
    try:
        b = start(tmp_path)
        try:
            yield a, b
        finally:
            b.close()
    finally:
        a.close()


def pid(kernel: KernelDriver) -> int:
    return int(kernel.run("import os; print(os.getpid())").text().strip())


def ok(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "ok", (execution.reply, execution.text())
    return execution.text()


def stderr(execution: Execution) -> list[str]:
    return [
        line
        for output in execution.outputs
        if output["msg_type"] == "stream" and output["content"]["name"] == "stderr"
        for line in output["content"]["text"].splitlines()
    ]


def sessions(kernel: KernelDriver) -> list[tuple[Any, ...]]:
    return kernel.query(
        "SELECT id, parent_id, link_kind, lease_pid, (SELECT count(*) FROM messages m"
        " WHERE m.session_id = s.id) FROM sessions s ORDER BY created_at"
    )


def ask_ops(kernel: KernelDriver) -> list[tuple[str, dict[str, Any]]]:
    """(view comm id, op) of every ask card the kernel sent, once each: a batch the view
    replays when the front end says "rendered" carries the same card again."""
    found: dict[tuple[str, Any], tuple[str, dict[str, Any]]] = {}
    for message in kernel.comm_messages:
        batch = message.get("data", {}).get("content")
        if isinstance(batch, list):
            for item in batch[1:]:
                if isinstance(item, dict) and item.get("op") == "ask":
                    found.setdefault(
                        (message["comm_id"], item.get("id")), (message["comm_id"], item)
                    )
    return list(found.values())


def test_headless_the_answer_is_fork(kernels: tuple[KernelDriver, KernelDriver]) -> None:
    a, b = kernels
    ok(a.run(HELLO))
    ((session, _, _, holder, count),) = sessions(a)
    assert holder == pid(a)
    text = ok(b.run(f"%%agent --tools none --session {session}\nAnd again.", timeout=60))
    assert "continuing in a fork of session" in text
    rows = sessions(a)
    assert len(rows) == 2
    original, fork = rows
    assert original == (session, None, None, holder, count)  # untouched, still A's
    assert fork[1:3] == (session, "fork")
    assert fork[3] == pid(b)
    assert fork[4] > count
    ((_, card),) = ask_ops(b)
    assert [c["value"] for c in card["choices"]] == ["fork", "take_over", "cancel"]
    assert card["default"] == "fork"
    assert "is open in another kernel" in card["question"]


def test_a_click_takes_over_and_the_old_kernel_is_told(
    kernels: tuple[KernelDriver, KernelDriver],
) -> None:
    a, b = kernels
    ok(a.run(HELLO))
    ((session, *_),) = sessions(a)
    b.run("%config AgentMagics.headless_wait = 20")
    execution = b.execute(f"%%agent --tools none --session {session}\nAnd again.")
    answered: set[str] = set()

    def asked() -> bool:
        for comm_id in b.view_comms():
            if comm_id not in answered:
                answered.add(comm_id)
                b.send_custom(comm_id, {"type": "rendered", "next": 0})
        return bool(ask_ops(b))

    b.wait(asked, 30, "the ask card")
    ((view, card),) = ask_ops(b)
    b.send_custom(view, {"type": "answer", "ask_id": card["id"], "choice": "take_over"})
    b.finish(execution, 60, "B's cell after the take-over")
    assert any(line.startswith("mibyan: took over session") for line in stderr(execution))
    ((same, _, _, holder, count),) = sessions(a)
    assert (same, holder) == (session, pid(b))
    later = a.run("%%agent --tools none\nAre you still there?", timeout=60)
    text = ok(later)
    assert "continuing in a fork of session" in text
    ((_, card_a),) = ask_ops(a)
    assert "was taken over by another kernel" in card_a["question"]
    assert sessions(a)[0][4] == count  # A wrote nothing more to it


def test_a_frozen_kernel_taken_for_dead_writes_nothing_after_waking(
    kernels: tuple[KernelDriver, KernelDriver],
) -> None:
    a, b = kernels
    a_pid = pid(a)
    execution = a.execute(RUN_PYTHON_CELL)
    answered: set[str] = set()

    def waiting() -> bool:
        for comm_id in a.view_comms():
            if comm_id not in answered:
                answered.add(comm_id)
                a.send_custom(comm_id, {"type": "rendered", "next": 0})
        return bool(a.awaiting_approval())

    a.wait(waiting, 30, "A to ask for approval")
    (call_id,) = a.awaiting_approval()
    ((session, _, _, _, before),) = sessions(a)
    os.kill(a_pid, signal.SIGSTOP)
    try:
        time.sleep(3)  # older than MIBYAN_LEASE_STALE_S: A is taken for dead
        taken = b.run(f"%%agent --tools none --session {session}\nCarry on.", timeout=60)
        assert any(line.startswith("mibyan: took over session") for line in stderr(taken))
        assert ask_ops(b) == []  # a dead holder is not asked about
    finally:
        os.kill(a_pid, signal.SIGCONT)
    after_b = sessions(b)[0][4]
    assert after_b > before
    (view,) = a.view_comms()
    a.send_custom(
        view, {"type": "decision", "call_id": call_id, "action": "approve", "scope": "once"}
    )
    a.finish(execution, 60, "A's cell after waking")
    lost = [line for line in stderr(execution) if "was taken over by kernel pid" in line]
    assert len(lost) == 1, stderr(execution)
    assert "stopped writing" in lost[0]
    assert sessions(a)[0][4] == after_b  # nothing of A's after B's
    with SessionStore(a.db_path) as store:
        messages = load_messages(store.db, session)
    view_of = ModelView(repair(messages))
    validate_transcript(view_of.messages)


LOCKER = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "conn.execute('ROLLBACK')\n"
)


def test_a_lock_during_a_run_one_line_then_one_when_recovered(tmp_path: Path) -> None:
    """Another process holds the write lock while a reply streams: the cell ends normally
    with one line saying the store failed; once the lock is gone the writes kept land,
    and the next cell says so in one line; the stored transcript is whole."""
    kernel = start(tmp_path)
    try:
        execution = kernel.execute("%%agent --model demo-slow --tools none\nTell me a story.")
        kernel.wait(lambda: len(kernel.comm_messages) >= 3, 30, "text to stream")
        locker = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(kernel.db_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert locker.stdout is not None
            assert locker.stdout.readline().strip() == "locked"
            kernel.finish(execution, 60, "the run to end while the store is locked")
        finally:
            locker.communicate("go\n", timeout=30)
        ok(execution)
        failed = [line for line in stderr(execution) if "the session store" in line]
        assert len(failed) == 1, stderr(execution)
        assert failed[0].startswith("mibyan: the session store failed: ")
        assert "locked" in failed[0]
        time.sleep(1.0)  # the kept writes land once the lock is gone
        later = kernel.run("%%agent --tools none\nAnd a short one.", timeout=60)
        ok(later)
        told = [line for line in stderr(later) if "the session store" in line]
        assert len(told) == 1, stderr(later)
        assert told[0].startswith("mibyan: the session store recovered: ")
        ((session, *_),) = sessions(kernel)
        with SessionStore(kernel.db_path) as store:
            messages = load_messages(store.db, session)
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
        assert kernel.query("SELECT status, end_reason FROM sessions") == [("idle", "completed")]
    finally:
        kernel.close()
