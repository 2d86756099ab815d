"""The throwaway server leaves nothing running: not after a suite that used it, not after
a process that forgot to stop it, not after one killed with SIGKILL (the parent-death
signal). Each run gets a TMPDIR of its own, so "nothing left" is: no live process whose
command line names that folder, and no server folder in it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mibyan_jupyter.testing.pg_cluster import PgCluster

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.slow

ONE_PG_TEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
ONE_PG_TEST += ["tests/pg/test_pg_connect.py::test_the_bootstrap_superuser_is_refused"]
STARTER = """
import sys, time
from mibyan_jupyter.testing.pg_cluster import PgCluster
cluster = PgCluster(fsync=False).start()
print(cluster.pid, cluster.start_seconds, flush=True)
if sys.argv[1] == "hang":
    time.sleep(120)
"""


def _live(folder: Path) -> list[int]:
    """Pids of live (not zombie) processes whose command line mentions ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(folder) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _gone(folder: Path, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while _live(folder):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def own_tmp(tmp_path: Path) -> Iterator[Path]:
    """A TMPDIR the postgres user can enter (pytest's are 0700)."""
    folder = Path(f"/tmp/mibyan-pg-test-{os.getpid()}-{tmp_path.name}")
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp)}


@pytest.mark.parametrize("ending", ["exit", "hang"])
def test_a_process_that_ends_without_stop_leaves_no_server(own_tmp: Path, ending: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", STARTER, ending],
        stdout=subprocess.PIPE,
        env=_env(own_tmp),
        text=True,
    ) as child:
        assert child.stdout is not None
        pid, start_seconds = child.stdout.readline().split()
        assert float(start_seconds) < 10  # ~0.6 s here (initdb + start)
        if ending == "hang":
            assert _live(own_tmp)  # running, until the process that started it is killed
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert _gone(own_tmp), f"postgres {pid} outlived its parent"
    if ending == "exit":  # atexit stopped it and removed its folder
        assert not list(own_tmp.glob("mibyan-pg-*"))


def test_a_suite_that_used_the_server_leaves_none(own_tmp: Path) -> None:
    run = subprocess.run(
        ONE_PG_TEST,
        cwd=ROOT,
        env=_env(own_tmp),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert _gone(own_tmp, timeout=1)
    assert not list(own_tmp.glob("mibyan-pg-*"))


def test_stop_is_fast_and_removes_the_folder() -> None:
    cluster = PgCluster(fsync=False).start()
    folder = cluster.folder
    assert folder is not None
    assert (folder / "data").is_dir()
    began = time.monotonic()
    cluster.stop()
    assert time.monotonic() - began < 5
    assert not folder.exists()
    assert _gone(folder, timeout=1)


@pytest.mark.parametrize(("no_skip", "outcome"), [("1", "1 error"), ("", "1 skipped")])
def test_without_postgres_the_tests_skip_unless_make_test_installed_it(
    own_tmp: Path, no_skip: str, outcome: str
) -> None:
    run = subprocess.run(
        ONE_PG_TEST,
        cwd=ROOT,
        env={**_env(own_tmp), "MIBYAN_PG_BIN": str(own_tmp / "none"), "MIBYAN_NO_SKIP": no_skip},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome in run.stdout, run.stdout
    if no_skip:
        assert "make test installs PostgreSQL" in run.stdout


def test_a_createrole_admin_migrates_a_fresh_server() -> None:
    """On a server with no mibyan roles yet, an admin with CREATEROLE (not a superuser)
    makes them, joins the owner and admin roles it made, and migrates."""
    import psycopg

    from mibyan_jupyter.admin import add_user
    from mibyan_jupyter.store.pg import LATEST, migrate
    from mibyan_jupyter.store.pg.check import problems

    with PgCluster(fsync=False) as cluster:
        with psycopg.connect(cluster.conninfo(), autocommit=True) as root:
            root.execute("CREATE ROLE hubadmin LOGIN CREATEROLE PASSWORD 'pw'")
            root.execute("CREATE DATABASE hub OWNER hubadmin")
        with psycopg.connect(
            cluster.conninfo("hub", "hubadmin"), password="pw", autocommit=True
        ) as conn:
            assert migrate(conn) == list(range(1, LATEST + 1))
            add_user(conn, "gil", course="ds101", role="student", password="gil-pw")
            found, _ = problems(conn)
            assert found == []
            member = conn.execute("SELECT pg_has_role('hubadmin', 'mibyan_app', 'MEMBER')")
            assert member.fetchone() == (False,)  # not a user: its kernel would be refused
