"""Real processes on one team store (PostgreSQL), through the real StoreWriter.

* **Load**: 20 processes, each a hub user of its own (its own login role, as 20 students'
  kernels are), run 200 turns each at once on one database: every row is there, per
  session, and no writer had anything to tell its user (no failure, no stall).
* **kill -9, then resume**: a recording agent run (the store suite's ``agent_run.py``
  worker) is killed at random points, several at once on one database; every message it
  reported durable is stored, in order without a gap, and ``SessionStore(url)`` +
  ``resume`` loads the session, repairs a cut tool batch and continues it; loading it again
  gives the same transcript.

Set ``MIBYAN_FAULT_SEED`` to replay a failing kill schedule (the seed is in every failure
message). docs/architecture.md, "Store" (its writer that recovers) and "The team store
(PostgreSQL)".
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pg_server import PgTestDb

from mibyan_jupyter.core import Reply, ScriptedModel
from mibyan_jupyter.core.messages import MESSAGE_ADAPTER, Message
from mibyan_jupyter.store import SessionStore, resume
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.resume import take_repair_report

WORKERS = Path(__file__).parents[1] / "store" / "store_workers"
SEED = int(os.environ.get("MIBYAN_FAULT_SEED", str(time.time_ns() % 1_000_000)))

PROCESSES = 20
TURNS = 200


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # 20 interpreters and 16,000 write transactions on 2 cores: ~20 s
@pytest.mark.timeout(180)
def test_twenty_processes_of_200_turns_lose_nothing(pg_db: PgTestDb) -> None:
    urls = [pg_db.url(pg_db.user(f"load{n}").name) for n in range(PROCESSES)]
    procs = [spawn(str(WORKERS / "turns.py"), url, str(TURNS)) for url in urls]
    sessions: list[str] = []
    for proc in procs:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("ready "), first + (proc.stderr.read() if proc.stderr else "")
        sessions.append(first.split()[1])
    began = time.perf_counter()
    for proc in procs:  # released together
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=150) for proc in procs]
    wall = time.perf_counter() - began
    outputs = [out for out, _ in results]
    assert [proc.returncode for proc in procs] == [0] * PROCESSES, results
    assert not [line for out in outputs for line in out.splitlines() if line.startswith("news")]
    admin = pg_db.admin()
    counts = dict(
        admin.execute(
            "SELECT session_id, count(*) FROM mibyan.messages GROUP BY session_id"
        ).fetchall()
    )
    assert counts == {session_id: 2 * TURNS for session_id in sessions}
    ledger = dict(
        admin.execute(
            "SELECT session_id, count(*) FROM mibyan.usage_ledger GROUP BY session_id"
        ).fetchall()
    )
    assert ledger == {session_id: TURNS for session_id in sessions}
    owners = admin.execute(
        "SELECT count(DISTINCT user_name), count(*) FROM mibyan.sessions"
        " WHERE status = 'idle' AND end_reason = 'completed'"
    ).fetchone()
    assert tuple(owners) == (PROCESSES, PROCESSES)
    seconds = sorted(float(out.split()[1]) for out in outputs)
    print(
        f"\n{PROCESSES} processes x {TURNS} turns: {wall:.1f} s wall;"
        f" per process {seconds[0]:.1f}-{seconds[-1]:.1f} s;"
        f" {PROCESSES * TURNS * 4 / wall:.0f} write transactions/s"
    )


# -- kill -9 at random points, then resume -----------------------------------------------------

KILLS = 6
KILL_TURNS = 60  # long enough that no run ends before its kill


@dataclass
class Run:
    """One recording run killed after ``after`` durable messages (plus a jitter)."""

    proc: subprocess.Popen[str]
    session_id: str
    after: int
    jitter: float
    lines: list[str] = field(default_factory=list)

    def drive(self) -> None:
        assert self.proc.stdout is not None
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.close()
        done = 0
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("done "):
                done += 1
                if done == self.after:
                    time.sleep(self.jitter)
                    self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def reported(self) -> dict[int, Message]:
        found: dict[int, Message] = {}
        for line in self.lines:
            if line.startswith("done ") and line.endswith("\n"):
                _, seq, data = line.split(" ", 2)
                found[int(seq)] = MESSAGE_ADAPTER.validate_json(data)
        return found


def start_runs(store: SessionStore, url: str, rng: random.Random) -> list[Run]:
    runs = []
    for _ in range(KILLS):
        session_id = store.create("killed", model="fake:worker").id
        proc = spawn(str(WORKERS / "agent_run.py"), url, session_id, str(KILL_TURNS))
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        if len(runs) % 2:  # anywhere
            runs.append(Run(proc, session_id, rng.randint(1, 80), rng.uniform(0, 0.006)))
        else:  # right after a reply that calls tools (seq 1 + 4k): inside its tool batch
            runs.append(Run(proc, session_id, 2 + 4 * rng.randint(0, 19), 0.0))
    return runs


@pytest.mark.slow  # six interpreters killed and resumed: ~4 s
@pytest.mark.timeout(120)
async def test_kill_9_at_random_points_then_resume_and_continue(pg_db: PgTestDb) -> None:
    url = pg_db.url(pg_db.user("killed").name)
    rng = random.Random(SEED)
    with SessionStore(url) as store:
        runs = start_runs(store, url, rng)
        threads = [threading.Thread(target=run.drive) for run in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), f"seed {SEED}: a run hung"
        repaired = 0
        for number, run in enumerate(runs):
            where = f"seed {SEED}, run {number}"
            repaired += await continue_run(store, run, where)
    assert repaired >= 1, f"seed {SEED}: no kill cut a tool batch"
    print(f"\nseed {SEED}: {KILLS} runs killed, {repaired} resumed with a cut tool batch repaired")


async def continue_run(store: SessionStore, run: Run, where: str) -> bool:
    """The stored run keeps every reported message, resumes and continues; loading it
    again gives the same transcript. Returns whether a cut tool batch was repaired."""
    assert run.proc.returncode == -signal.SIGKILL, f"{where}: not killed mid-run"
    reported, stored = run.reported(), load_messages(store.db, run.session_id)
    assert sorted(reported) == list(range(len(reported))), where
    assert len(reported) <= len(stored) <= len(reported) + 1, where
    assert all(stored[seq] == message for seq, message in reported.items()), where
    seqs = store.db.conn.execute(
        "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (run.session_id,)
    ).fetchall()
    assert [seq for (seq,) in seqs] == list(range(len(stored))), f"{where}: a gap"
    model = ScriptedModel([Reply(text="Picking up where we stopped.")])
    agent, info = resume(store, run.session_id, stream_fn=model, model="fake:worker")
    assert info.id == run.session_id
    report = take_repair_report(agent)
    counts = report.counts if report else {}
    cut = counts.get("missing_result", 0) + counts.get("not_run", 0)
    assert await agent.achat("go on") == "Picking up where we stopped.", where
    again, _ = resume(store, run.session_id, stream_fn=model, model="fake:worker")
    assert again.state.messages == agent.state.messages, where  # the same load, continued
    assert [m.role for m in agent.state.messages[-2:]] == ["user", "assistant"], where
    assert store.get(run.session_id).message_count == len(stored) + 2, where
    return bool(cut)
