"""Fault tests with real processes (issue 4: "it must never lose a message that had
finished").

* kill -9 a recording agent at 20 random points of a tool-using run (ten runs at a time on
  one database file, as ten kernels would): the file passes ``integrity_check`` and every
  message the worker reported durable is there, equal to what it reported;
* four processes append 500 messages each to one database at once (two of them also share
  a session): all 2,000 rows are there, in order, and no worker saw any exception
  ("database is locked" included).

Both run on each backend (tests/store_backend.py): the SQLite file, and the team store
(PostgreSQL), where the file checks are PostgreSQL's own business and are skipped. The
workers are plain scripts in ``store_workers/``. Set ``MIBYAN_FAULT_SEED`` to replay a
failing run's kill schedule (the seed is in every failure message).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from store_backend import Backend

from mibyan_jupyter.core.messages import MESSAGE_ADAPTER, Message
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.records import insert_session, load_messages

WORKERS = Path(__file__).parent / "store_workers"
ROUNDS = 2
PER_ROUND = 10  # 20 kills in all
TURNS = 60  # long enough that no run can finish before its kill (about 2.5 s alone)
LATEST_KILL = 1.5  # seconds after the worker is ready
SEED = int(os.environ.get("MIBYAN_FAULT_SEED", str(time.time_ns() % 1_000_000)))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@dataclass
class Worker:
    """One recording run and the plan to kill it: after ``delay`` seconds, or right
    after its ``after_lines``-th durable message (then ``delay`` is a small jitter)."""

    proc: subprocess.Popen[str]
    session_id: str
    delay: float
    after_lines: int | None
    lines: list[str] = field(default_factory=list)
    errors: str = ""

    def drive(self, ready: threading.Barrier) -> None:
        """Release the worker once all are ready, read its output, kill it as planned. Runs
        in its own thread."""
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        self.lines.append(first)
        ready.wait()  # every worker has started and opened the database: release them
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.close()
        if self.after_lines is None:
            timer = threading.Timer(self.delay, self.kill)
            timer.start()
        done = 0
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("done "):
                done += 1
                if done == self.after_lines:
                    time.sleep(self.delay)
                    self.kill()
        self.proc.wait()
        if self.after_lines is None:
            timer.cancel()
        assert self.proc.stderr is not None
        self.errors = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # os.kill, unless it has already exited

    def reported(self) -> dict[int, Message]:
        """The messages the worker said were durable, by sequence number."""
        found: dict[int, Message] = {}
        for line in self.lines:
            if line.startswith("done ") and line.endswith("\n"):  # a cut line was never sent
                _, seq, data = line.split(" ", 2)
                found[int(seq)] = MESSAGE_ADAPTER.validate_json(data)
        return found


def start_round(path: str | Path, rng: random.Random) -> list[Worker]:
    workers = []
    with closing(open_database(path)) as db:
        sessions = [insert_session(db, model="fake:worker") for _ in range(PER_ROUND)]
    for session_id in sessions:
        by_lines = rng.random() < 0.5
        proc = subprocess.Popen(
            [sys.executable, str(WORKERS / "agent_run.py"), str(path), session_id, str(TURNS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        workers.append(
            Worker(
                proc,
                session_id,
                delay=rng.uniform(0, 0.01) if by_lines else rng.uniform(0.02, LATEST_KILL),
                after_lines=rng.randint(1, 120) if by_lines else None,
            )
        )
    return workers


def check_after_kills(path: str | Path, workers: list[Worker], where: str) -> None:
    with closing(open_database(path)) as db:
        if not db.dialect.is_postgres:  # the file itself (PostgreSQL keeps its own)
            assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", where
            assert db.conn.execute("PRAGMA foreign_key_check").fetchall() == [], where
        for number, worker in enumerate(workers):
            tag = f"{where}, worker {number}"
            assert worker.proc.returncode == -signal.SIGKILL, (
                f"{tag}: not killed mid-run (rc {worker.proc.returncode}); stderr: {worker.errors}"
            )
            reported = worker.reported()
            stored = load_messages(db, worker.session_id)
            seqs = [
                row[0]
                for row in db.conn.execute(
                    "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq",
                    (worker.session_id,),
                )
            ]
            assert seqs == list(range(len(stored))), f"{tag}: a gap in the stored messages"
            assert sorted(reported) == list(range(len(reported))), tag
            # Every message reported durable is there and equal; at most one more was
            # committed in the instant between its commit and its report.
            assert len(reported) <= len(stored) <= len(reported) + 1, tag
            for seq, message in reported.items():
                assert stored[seq] == message, f"{tag}: message {seq} differs"


def test_kill_9_at_random_points_loses_no_finished_message(
    tmp_path: Path, backend: Backend
) -> None:
    rng = random.Random(SEED)
    killed_with_messages = 0
    for round_ in range(ROUNDS):
        # A file per round; on PostgreSQL one database (each round its own sessions).
        path = backend.target if backend.is_postgres else tmp_path / f"kill{round_}.sqlite3"
        workers = start_round(path, rng)
        ready = threading.Barrier(len(workers))
        threads = [threading.Thread(target=w.drive, args=(ready,)) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), f"seed {SEED}: a worker hung"
        for worker in workers:
            assert worker.lines[0] == "ready\n", f"seed {SEED}: {worker.lines[:3]}"
        check_after_kills(path, workers, f"seed {SEED}, round {round_}")
        killed_with_messages += sum(bool(w.reported()) for w in workers)
    # The kills landed inside the runs, not before the first message.
    assert killed_with_messages >= ROUNDS * PER_ROUND // 2, f"seed {SEED}"


# -- several writers at once ----------------------------------------------------------------

APPENDERS = 4
EACH = 500


def test_four_processes_append_500_messages_each(
    backend: Backend,
) -> None:
    path = backend.target
    with closing(open_database(path)) as db:
        own = [insert_session(db) for _ in range(APPENDERS)]
        shared = insert_session(db)
    procs = []
    for worker in range(APPENDERS):
        sessions = [own[worker]] + ([shared] if worker < 2 else [])
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKERS / "append_many.py"),
                    str(path),
                    str(worker),
                    str(EACH),
                    *sessions,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
    for proc in procs:  # released together: the appends contend for the write lock
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * APPENDERS, outputs
    assert all(out.startswith(f"ok {EACH} ") for out in outputs), outputs
    assert not any("locked" in out for out in outputs), outputs

    with closing(open_database(path)) as db:
        assert db.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == APPENDERS * EACH
        if not backend.is_postgres:
            assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        expected_counts = {
            own[0]: EACH // 2,
            own[1]: EACH // 2,
            own[2]: EACH,
            own[3]: EACH,
            shared: EACH,
        }
        for session_id, count in expected_counts.items():
            seqs = [
                row[0]
                for row in db.conn.execute(
                    "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
                )
            ]
            assert seqs == list(range(count)), session_id
        texts = [str(m.content) for m in load_messages(db, shared)]
        # The shared session interleaves two writers; each one's messages keep their order.
        for worker in (0, 1):
            numbers = [int(t.rsplit(" ", 1)[1]) for t in texts if t.startswith(f"worker {worker} ")]
            assert numbers == list(range(1, EACH, 2))
        for worker in (2, 3):
            stored = [str(m.content) for m in load_messages(db, own[worker])]
            assert stored == [f"worker {worker} message {n}" for n in range(EACH)]
