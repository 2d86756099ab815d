"""Approvals the agent cannot grant itself, in a real ipykernel: a scripted model (the
loopback fake server) has an approved ``run_python`` try every designed way to widen its
own permissions — ``%agent policy set run_shell allow``, ``%config AgentMagics.approve``,
setting the magic's trait, ``MIBYAN_APPROVE=auto``, the store's rules API, a row written
into the database with sqlite3, and a function it leaves behind to try again after the run.
Each is refused; the next ``run_shell`` still asks, in this kernel and in a new one; and
the audit says who decided (``user``, ``policy``, ``rule``) truthfully."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_driver import Execution, KernelDriver

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(180)]

ESCALATE = """\
import os, sqlite3
from mibyan_jupyter.jupyter.state import kernel_state

def attempt(name, action):
    try:
        action()
        print(name, "ALLOWED")
    except Exception as error:
        print(name, "REFUSED", type(error).__name__)

ip = get_ipython()
magics = ip.magics_manager.registry["AgentMagics"]
attempt("policy", lambda: ip.run_line_magic("agent", "policy set run_shell allow"))
ip.run_line_magic("config", "AgentMagics.approve = 'auto'")
print("config", magics.approve)
attempt("trait", lambda: setattr(magics, "approve", "auto"))
os.environ["MIBYAN_APPROVE"] = "auto"
attempt("store", lambda: kernel_state().store().save_always_rule("run_shell", True))
with sqlite3.connect(os.environ["MIBYAN_DB"]) as conn:
    conn.execute("INSERT INTO approval_rules (tool, approved, created_at, origin, mac)"
                 " VALUES ('run_shell', 1, 1.0, 'cell', 'forged')")
print("sqlite INSERTED")

def later(*args):
    global LATER
    try:
        ip.run_line_magic("agent", "policy set run_shell allow")
        LATER = "ALLOWED"
    except Exception as error:
        LATER = "REFUSED " + type(error).__name__
    ip.events.unregister("post_run_cell", later)

ip.events.register("post_run_cell", later)
"""


def cell(server: FakeProviderServer, tools: str, prompt: str = "go", *, more: str = "") -> str:
    return f"%%agent --model fake:demo@{server.base_url} --tools {tools} {more}\n{prompt}"


class FrontEnd:
    """Plays the view's front end: says "rendered" for every view, clicks decisions."""

    def __init__(self, kernel: KernelDriver) -> None:
        self.kernel = kernel

    def render(self) -> None:
        """Said again at each look, as a page that reloads would: the first may reach the
        kernel before the view listens."""
        for comm_id in self.kernel.view_comms():
            self.kernel.send_custom(comm_id, {"type": "rendered"})

    def wait_asked(self, call_id: str) -> None:
        def asked() -> bool:
            self.render()
            return call_id in self.kernel.awaiting_approval()

        self.kernel.wait(asked, 40, f"{call_id} to be asked")

    def click(self, call_id: str, action: str, scope: str = "once") -> None:
        """A click on the newest view's card (the running cell's)."""
        decision = {"type": "decision", "call_id": call_id, "action": action, "scope": scope}
        self.kernel.send_custom(self.kernel.view_comms()[-1], decision)


def audit(kernel: KernelDriver, call_id: str) -> tuple[object, ...]:
    rows = kernel.query(
        "SELECT decision, decided_by, scope, reason FROM tool_calls WHERE call_id = ?", call_id
    )
    assert len(rows) == 1, rows
    return rows[0]


def finish(kernel: KernelDriver, execution: Execution, front: FrontEnd) -> None:
    def done() -> bool:
        front.render()
        return execution.done

    kernel.wait(done, 60, "the cell to finish")
    assert (execution.reply or {}).get("status") == "ok", execution.text()[-3000:]


def test_every_escalation_from_approved_code_is_refused_and_run_shell_still_asks(
    kernel: KernelDriver, server: FakeProviderServer, tmp_path: Path
) -> None:
    server.push(
        FakeReply(calls=[FakeCall("run_python", {"code": ESCALATE}, id="py1")]),
        FakeReply(calls=[FakeCall("run_shell", {"command": "echo shell-ran"}, id="sh1")]),
        FakeReply("done"),
    )
    front = FrontEnd(kernel)
    execution = kernel.execute(cell(server, "python,shell"))
    front.wait_asked("py1")
    front.click("py1", "approve")
    front.wait_asked("sh1")  # the run_shell after the escalation still asks
    front.click("sh1", "deny")
    finish(kernel, execution, front)

    said = execution.text()
    for path in ("policy", "trait", "store"):
        assert f"{path} REFUSED" in said, said[-3000:]
    assert "config ask" in said, "the refused %config left the default as it was"
    assert "sqlite INSERTED" in said
    assert audit(kernel, "py1")[:3] == ("approved", "user", "once")
    assert audit(kernel, "sh1")[:3] == ("denied", "user", "once")

    later = kernel.run("print(LATER)")
    assert "REFUSED RefusedInsideRun" in later.text(), later.text()
    shown = kernel.run("%agent policy").text()
    assert "ignored" in shown, shown
    assert "always (saved)" not in shown, "no rule was saved"
    approve = kernel.run("print(get_ipython().magics_manager.registry['AgentMagics'].approve)")
    assert approve.text().strip() == "ask"

    # A later cell in the same kernel: MIBYAN_APPROVE=auto (set by the code) is ignored,
    # the forged row is ignored, so run_shell asks again.
    server.push(
        FakeReply(calls=[FakeCall("run_shell", {"command": "echo shell-ran"}, id="sh2")]),
        FakeReply("done"),
    )
    front = FrontEnd(kernel)
    execution = kernel.execute(cell(server, "shell"))
    front.wait_asked("sh2")
    front.click("sh2", "deny")
    finish(kernel, execution, front)
    assert "MIBYAN_APPROVE is now 'auto'" in execution.text()
    assert audit(kernel, "sh2")[:2] == ("denied", "user")

    # A new kernel on the same database: nothing was saved that lets run_shell run.
    other = KernelDriver(tmp_path)
    try:
        other.run("%load_ext mibyan_jupyter")
        other.run("%config AgentMagics.headless_wait = 0.3")
        server.push(
            FakeReply(calls=[FakeCall("run_shell", {"command": "echo shell-ran"}, id="sh3")]),
            FakeReply("done"),
        )
        headless = other.run(cell(server, "shell", "again"), timeout=60)
        assert (headless.reply or {}).get("status") == "ok"
        decision, decided_by, _scope, reason = audit(other, "sh3")
        assert (decision, decided_by) == ("denied", "policy")
        assert "no one can click" in str(reason)
    finally:
        other.close()


def test_the_audit_names_who_decided(kernel: KernelDriver, server: FakeProviderServer) -> None:
    """``rule`` for a saved rule (one a user cell saved, one an "always" click saved),
    ``user`` for the click itself, ``policy`` for ``--approve auto``."""
    assert "RefusedInsideRun" not in kernel.run("%agent policy set run_shell allow").text()
    server.push(
        FakeReply(calls=[FakeCall("run_shell", {"command": "echo ruled"}, id="sh1")]),
        FakeReply(calls=[FakeCall("run_python", {"code": "print(6 * 7)"}, id="py1")]),
        FakeReply(calls=[FakeCall("run_python", {"code": "print(7 * 7)"}, id="py2")]),
        FakeReply("done"),
    )
    front = FrontEnd(kernel)
    execution = kernel.execute(cell(server, "python,shell"))
    front.wait_asked("py1")
    front.click("py1", "approve", scope="always")
    finish(kernel, execution, front)
    decision, decided_by, scope, reason = audit(kernel, "sh1")
    assert (decision, decided_by, scope) == ("approved", "rule", "always")
    assert reason == "a saved 'always' rule allows run_shell"
    assert audit(kernel, "py1")[:3] == ("approved", "user", "always")
    assert audit(kernel, "py2")[:3] == ("approved", "rule", "always")
    origins = kernel.query("SELECT tool, origin FROM approval_rules ORDER BY tool")
    assert origins == [("run_python", "approval"), ("run_shell", "cell")]

    kernel.run("%agent policy reset")
    server.push(
        FakeReply(calls=[FakeCall("run_shell", {"command": "echo auto"}, id="sh2")]),
        FakeReply("done"),
    )
    front = FrontEnd(kernel)
    execution = kernel.execute(cell(server, "shell", more="--approve auto"))
    finish(kernel, execution, front)
    assert audit(kernel, "sh2")[:2] == ("approved", "policy")
