"""The admin policy from a real kernel running as a NON-ROOT user, as a student's kernel on
a hub: the policy file is root's (the student cannot write it), and every path an honest
user has to loosen it is tried and loses: ``--approve auto``, ``%config``, ``MIBYAN_APPROVE``
in the kernel's environment, ``%agent policy set``, and the student's own IPython config
file. Exam mode refuses with the admin's message, a used-up cap says which limit, its value
and when it resets, a policy file the student could write turns the agent off, and the
audit trail records it all under the student's name.

Why a throwaway user: as root every permission check passes, so the tests would prove
nothing. The session fixture makes one with ``useradd`` (removed afterwards). The kernel
is started by a small root wrapper that hands the connection file over, drops to that
user and execs the system's Python 3.11 with the project's site-packages (the venv's own
interpreter lives under /root, which the user cannot enter here)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_driver import KEYS, Execution, KernelDriver
from policy_support import policy_folder, write_policy

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a non-root user"),
]

SYSTEM_PYTHON = "/usr/bin/python3.11"
SITE = str(
    Path(sys.prefix)
    / "lib"
    / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    / "site-packages"
)
WRAPPER = """\
import os, shutil, sys
connection, user, uid, gid, home, python, site = sys.argv[1:8]
copy = os.path.join(home, "kernel-connection.json")
shutil.copyfile(connection, copy)
os.chown(copy, int(uid), int(gid))
os.setgroups([])
os.setgid(int(gid))
os.setuid(int(uid))
os.environ.update(HOME=home, USER=user, LOGNAME=user)
boot = ("import site, sys, runpy; site.addsitedir(%r); sys.argv = ['ipykernel_launcher', '-f', %r];"
        " runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)") % (site, copy)
os.execv(python, [python, "-c", boot])
"""


@dataclass(frozen=True)
class Student:
    name: str
    uid: int
    gid: int
    home: Path


@pytest.fixture(scope="session")
def student() -> Iterator[Student]:
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip(f"{SYSTEM_PYTHON} (a Python the user can run) is not installed")
    name = f"mibyan-st{os.getpid() % 100000}"
    home = Path(tempfile.mkdtemp(prefix="mibyan-student-", dir="/tmp"))
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell",
         "/usr/sbin/nologin", name],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        entry = pwd.getpwnam(name)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        home.chmod(0o700)
        yield Student(name, entry.pw_uid, entry.pw_gid, home)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def policy_file() -> Iterator[Path]:
    """A root-owned policy file in a root-owned folder the student can read, not write."""
    with policy_folder() as path:
        yield path


class StudentKernel(KernelDriver):
    """:class:`KernelDriver`'s kernel, started as ``student`` through the wrapper."""

    def __init__(self, student: Student, work: Path, env: dict[str, str]) -> None:
        specs = work.parent / f"kernels-{work.name}"
        spec = specs / "student"
        spec.mkdir(parents=True)
        (spec / "wrapper.py").write_text(WRAPPER, encoding="utf-8")
        argv = [sys.executable, str(spec / "wrapper.py"), "{connection_file}", student.name,
                str(student.uid), str(student.gid), str(student.home), SYSTEM_PYTHON, SITE]  # fmt: skip
        kernel_json = {"argv": argv, "display_name": "student", "language": "python"}
        (spec / "kernel.json").write_text(json.dumps(kernel_json), encoding="utf-8")
        environment = {k: v for k, v in os.environ.items() if k not in KEYS}
        environment.update(env)
        self.db_path = Path(env["MIBYAN_DB"])
        self.manager = KernelManager(
            kernel_name="student", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)])
        )
        self.manager.start_kernel(cwd=str(work), env=environment)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.executions: dict[str, Execution] = {}
        self.comms = {}
        self.comm_messages = []


@pytest.fixture
def kernel(student: Student, policy_file: Path) -> Iterator[StudentKernel]:
    work = student.home / f"work-{time.monotonic_ns()}"
    work.mkdir()
    os.chown(work, student.uid, student.gid)
    profile = student.home / ".ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_config.py").write_text(  # the student's own config file
        "c.AgentMagics.approve = 'auto'\nc.AgentMagics.model = 'openai:gpt-4.1-mini'\n",
        encoding="utf-8",
    )
    for path in (student.home / ".ipython", profile, profile / "ipython_config.py"):
        os.chown(path, student.uid, student.gid)
    env = {
        "MIBYAN_DB": str(work / "sessions.sqlite3"),
        "MIBYAN_MEMORY_DIR": str(work / "memory"),
        "MIBYAN_POLICY": str(policy_file),  # the one allowed way: it only adds a file
        "MIBYAN_APPROVE": "auto",  # the environment tries to loosen it too
        "JUPYTERHUB_USER": student.name,
        "OPENAI_API_KEY": "sk-not-a-real-key",
        "MIBYAN_DEMO_DELAY": "0",
        "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
        "MIBYAN_RULE_KEY": str(work / "rule-key"),
    }
    driver = StudentKernel(student, work, env)
    try:
        loaded = driver.run("%load_ext mibyan_jupyter", timeout=60)
        assert (loaded.reply or {}).get("status") == "ok", loaded.text()
        yield driver
    finally:
        driver.close()


def ok(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "ok", execution.text()[-3000:]
    return execution.text()


def refused(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "error", execution.text()[-3000:]
    return execution.text()


POLICY = """
[models]
providers = ["anthropic"]
[tools]
disabled = ["files"]
[approval]
always_ask = ["run_shell"]
allow_always_rules = false
allow_auto_approve = false
[review]
reviewable = true
[courses.stats101]
instructors = ["prof"]
students = ["{student}"]
"""
SHELL_CELL = (
    "%%agent --model demo --tools shell,files --approve auto\nUse run_shell:\n```sh\necho hi\n```"
)


def test_the_policy_wins_over_every_honest_path(
    kernel: StudentKernel, student: Student, policy_file: Path
) -> None:
    write_policy(policy_file, POLICY.format(student=student.name))
    who = ok(kernel.run(f"import os; print(os.getuid(), os.access({str(policy_file)!r}, os.W_OK))"))
    assert f"{student.uid} False" in who  # not root, and the policy is not the student's to write

    # Their own config file set model = openai:...: refused by the allowed providers.
    said = refused(kernel.run("%%agent\nhello"))
    assert "the admin policy refuses this cell: provider openai is not allowed" in said

    # --approve auto, %config, MIBYAN_APPROVE and the config file's approve=auto, and a
    # saved "always" rule from %agent policy set: run_shell is still asked (nobody clicks
    # here, so after headless_wait the policy denies it), the files group is off.
    ok(kernel.run("%config AgentMagics.approve = 'auto'"))
    ok(kernel.run("%config AgentMagics.headless_wait = 0.3"))
    ok(kernel.run("%agent policy set run_shell allow"))
    said = ok(kernel.run(SHELL_CELL, timeout=60))
    assert "the admin policy turns off tool group(s) files" in said
    assert "does not allow --approve auto" in said
    assert kernel.query("SELECT name, decision, decided_by FROM tool_calls") == [
        ("run_shell", "denied", "policy")
    ]
    assert "mibyan: your instructors can review this conversation" in said
    sent = str(kernel.comm_messages) + str(kernel.comms)  # the view's ops: its header says it
    assert "'reviewable': 'Your instructors can review this conversation" in sent

    # A student cannot review.
    said = refused(kernel.run("%agent review"))
    assert f"the roster names {student.name} in none" in said

    # Exam mode: the admin's message, whatever the cell says.
    write_policy(policy_file, '[exam]\nenabled = true\nmessage = "Midterm: no AI until 12:00."\n')
    said = refused(kernel.run("%%agent --model demo --approve auto\nhello"))
    assert "exam mode: Midterm: no AI until 12:00." in said

    # A daily cap used up by earlier spending: which limit, its value, when it resets.
    write_policy(policy_file, "[caps]\ndaily_cost_per_user = 0.01\n")
    ok(kernel.run(
        "from mibyan_jupyter.jupyter.state import kernel_state\nimport time\n"
        "s = kernel_state().store(); sid = s.create('earlier').id\n"
        "with s.db.transaction() as c:\n"
        "    c.execute('INSERT INTO usage_ledger (session_id, cost, created_at) VALUES (?, 0.02, ?)',"
        " (sid, time.time()))"
    ))  # fmt: skip
    said = refused(kernel.run("%%agent --model demo --max-cost 5\nhello"))
    assert "your daily cost cap ($0.01, admin policy) is used up ($0.02 today)" in said
    assert "it resets at 00:00 UTC (in " in said

    # A policy file the student could write is refused, and the agent is off.
    os.chown(policy_file, student.uid, student.gid)
    said = refused(kernel.run("%%agent --model demo\nhello"))
    assert f"the agent is off: the admin policy {policy_file} is owned by uid {student.uid}" in said

    rows = kernel.query("SELECT user_name, kind FROM audit ORDER BY id")
    assert {user for user, _ in rows} == {student.name}
    kinds = [kind for _, kind in rows]
    for kind in ("policy_change", "policy_denial", "approval", "exam_refusal", "cap_hit"):
        assert kind in kinds, kinds
    assert kernel.query("SELECT DISTINCT user_name FROM sessions") == [(student.name,)]
