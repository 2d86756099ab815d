"""A real kernel on the PostgreSQL team store, as a student's login role.

``MIBYAN_DB_URL`` names the team store (no password: the session's PGPASSFILE holds it,
as a hub's spawner provides one); the kernel's ``%%agent`` cell stores its session there,
``%agent sessions`` and ``%agent status`` say so, and a second kernel resumes it with
``--session last`` on the session's model, not the one configured (docs/architecture.md,
"The team store (PostgreSQL)"). What the database holds is read as the superuser.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jupyter"))
from kernel_driver import Execution, KernelDriver
from pg_server import PgTestDb
from policy_support import policy_folder, write_policy

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(180)]


def ok(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "ok", (execution.reply, execution.text())
    return execution.text()


def start(workdir: Path, url: str, policy: Path | None = None) -> KernelDriver:
    env = {"MIBYAN_DB_URL": url, "JUPYTERHUB_USER": "someone-else"}
    if policy is not None:
        env["MIBYAN_POLICY"] = str(policy)
    driver = KernelDriver(workdir, env=env)
    ok(driver.run("%load_ext mibyan_jupyter"))
    return driver


@pytest.fixture
def kernels(tmp_path: Path) -> Iterator[list[KernelDriver]]:
    started: list[KernelDriver] = []
    try:
        yield started
    finally:
        for driver in started:
            driver.close()


def test_a_students_kernel_keeps_its_sessions_in_the_team_store(
    pg_db: PgTestDb, tmp_path: Path, kernels: list[KernelDriver]
) -> None:
    student = pg_db.user("ada", course="cs1")
    url = pg_db.url(student.name)
    assert student.password not in url
    with policy_folder() as policy:
        write_policy(policy, "[review]\nreviewable = true\n")
        first = start(tmp_path, url, policy)
        kernels.append(first)
        ok(first.run("%%agent --model demo --tools none\nHello from the team store.", timeout=60))
    rows = pg_db.admin().execute("SELECT id, user_name, model, config FROM mibyan.sessions")
    ((session, owner, model, config),) = rows.fetchall()
    # The login role, not the JUPYTERHUB_USER the environment claims.
    assert (owner, model) == (student.name, "demo")
    assert "your instructors can review" in json.loads(config)["reviewable"]
    trail = pg_db.admin().execute("SELECT user_name, kind FROM mibyan.audit").fetchall()
    assert trail == [(student.name, "policy_change")]
    texts = pg_db.admin().execute(
        "SELECT text FROM mibyan.messages WHERE session_id = %s ORDER BY seq", (session,)
    )
    assert any("Hello from the team store." in (t or "") for (t,) in texts)
    listed = ok(first.run("%agent sessions"))
    assert session[:8] in listed
    status = ok(first.run("%agent status"))
    assert "the team store" in status
    assert student.password not in status
    assert not (tmp_path / "sessions.sqlite3").exists()  # nothing went to SQLite

    first.close()  # a restart: the lease is given back, so the next kernel resumes, not forks
    kernels.remove(first)
    second = start(tmp_path, url)
    kernels.append(second)
    ok(second.run("%config AgentMagics.model = 'openai:gpt-4o-mini'"))
    ok(second.run("%%agent --session last --tools none\nAnd once more.", timeout=60))
    again = pg_db.admin().execute("SELECT id, model FROM mibyan.sessions").fetchall()
    assert again == [(session, "demo")]
    count = pg_db.admin().execute(
        "SELECT count(*) FROM mibyan.messages WHERE session_id = %s AND role = 'user'", (session,)
    )
    assert count.fetchone()[0] == 2
    assert session[:8] in ok(second.run("%agent status"))


def test_a_team_store_that_refuses_is_one_line_without_the_password(
    pg_db: PgTestDb, tmp_path: Path, kernels: list[KernelDriver]
) -> None:
    """A role the server does not know: the cell fails with one line naming the team store."""
    url = pg_db.url("nobody_here")
    driver = start(tmp_path, url)
    kernels.append(driver)
    execution = driver.run("%%agent --model demo --tools none\nHello.", timeout=60)
    text = execution.text()
    lines = [line for line in text.splitlines() if "team store" in line]
    assert len(lines) == 1, text
    assert "nobody_here" in lines[0]
    assert "MIBYAN_DB_URL" in lines[0]
    assert "Traceback" not in text
    assert not (tmp_path / "sessions.sqlite3").exists()


def _stored(pg_db: PgTestDb, session: str) -> list[tuple[int, str]]:
    rows = pg_db.admin().execute(
        "SELECT seq, role FROM mibyan.messages WHERE session_id = %s ORDER BY seq", (session,)
    )
    return [(int(seq), str(role)) for seq, role in rows.fetchall()]


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_a_kernel_killed_at_a_random_point_resumes_in_the_next(
    pg_db: PgTestDb, tmp_path: Path, kernels: list[KernelDriver], seed: int
) -> None:
    """SIGKILL of a real kernel while its second turn streams (a point drawn from the seed,
    anywhere from just after the cell starts to near its end), then a new kernel: the team
    store held every finished message with no gap, the next kernel takes the dead one's
    lease (it does not fork) and continues the same session, and the transcript it stored
    loads through the store's own resume."""
    import os
    import random
    import signal
    import time

    from mibyan_jupyter.store.resume import load_history
    from mibyan_jupyter.store.sessions import SessionStore

    student = pg_db.user("kim")
    url = pg_db.url(student.name)
    first = start(tmp_path, url)
    kernels.append(first)
    ok(first.run("%%agent --model demo --tools none\nFirst question.", timeout=60))
    ((session,),) = pg_db.admin().execute("SELECT id FROM mibyan.sessions").fetchall()
    before = _stored(pg_db, session)
    first.execute("%%agent --model demo-slow --session last --tools none\nA long story, please.")
    first.wait(lambda: len(first.comm_messages) >= 1, 30, "the second turn to start")
    time.sleep(random.Random(seed).uniform(0.05, 2.5))  # the kill point itself, not a wait
    process = first.manager.provisioner.process  # type: ignore[union-attr]
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)  # reaped, as the Jupyter server reaps a dead kernel
    kernels.remove(first)
    first.close()  # its channels, sockets and connection file (the process is gone)

    kept = _stored(pg_db, session)
    assert kept[: len(before)] == before
    assert [seq for seq, _ in kept] == list(range(len(kept)))  # no gap, nothing half-written
    second = start(tmp_path, url)
    kernels.append(second)
    ok(second.run("%%agent --model demo --session last --tools none\nAnd now?", timeout=60))
    assert pg_db.admin().execute("SELECT count(*) FROM mibyan.sessions").fetchone() == (1,)
    after = _stored(pg_db, session)
    assert after[: len(kept)] == kept
    assert [seq for seq, _ in after] == list(range(len(after)))
    assert after[-1][1] == "assistant"
    with SessionStore(url) as store:
        history = load_history(store, store.get(session))
    assert [m.role for m in history.messages][-2:] == ["user", "assistant"]
    assert sum(m.role == "user" for m in history.messages) >= 2
