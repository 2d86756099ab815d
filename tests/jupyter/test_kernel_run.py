"""``%%agent`` in a real ipykernel: the cell awaits its run, a click sent as a comm message
while it runs resolves the approval, Stop ends the cell normally, Kernel > Interrupt gives
a one-line error and a valid stored transcript, and with no front end the policy decides."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_driver import KernelDriver

from mibyan_jupyter.core.transcript import ModelView, validate_transcript
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.resume import repair
from mibyan_jupyter.store.sessions import SessionStore

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

RUN_PYTHON_CELL = "%%agent --tools python\nUse run_python to compute:\n```python\nprint(6 * 7)\n```"


def _render_views(kernel: KernelDriver, answered: set[str]) -> None:
    """Play the front end: every new view says it rendered."""
    for comm_id in kernel.view_comms():
        if comm_id not in answered:
            answered.add(comm_id)
            kernel.send_custom(comm_id, {"type": "rendered"})


def _wait_for_approval(kernel: KernelDriver) -> tuple[str, str]:
    """Play the front end until the run asks for approval: (call id, the view's comm id)."""
    answered: set[str] = set()

    def waiting() -> bool:
        _render_views(kernel, answered)
        return bool(kernel.awaiting_approval())

    kernel.wait(waiting, 30, "an approval to be asked")
    (call_id,) = kernel.awaiting_approval()
    (view,) = kernel.view_comms()
    return call_id, view


def _stored_transcript_is_valid(db_path: Path) -> list[object]:
    with SessionStore(db_path) as store:
        (info,) = store.list()
        assert info.status != "running", info.status
        messages = load_messages(store.db, info.id)
    view = ModelView(repair(messages))  # raises if the model could not be sent it
    validate_transcript(view.messages)
    view.check_complete()
    return list(messages)


def test_a_click_sent_while_the_cell_runs_resolves_the_approval(kernel: KernelDriver) -> None:
    execution = kernel.execute(RUN_PYTHON_CELL)
    call_id, view = _wait_for_approval(kernel)
    assert not execution.idle, "the cell must still be running while it waits for the click"
    kernel.send_custom(
        view, {"type": "decision", "call_id": call_id, "action": "approve", "scope": "once"}
    )
    kernel.finish(execution, 30, "the run to finish after Approve")
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    rows = kernel.query("SELECT decision, decided_by FROM tool_calls WHERE call_id = ?", call_id)
    assert rows == [("approved", "user")]
    assert "42" in execution.text()
    assert "mibyan-transcript" in execution.text()
    _stored_transcript_is_valid(kernel.db_path)


def test_without_a_front_end_the_policy_denies_and_the_run_completes(
    kernel: KernelDriver,
) -> None:
    kernel.run("%config AgentMagics.headless_wait = 0.3")
    execution = kernel.run(RUN_PYTHON_CELL, timeout=40)
    assert execution.reply is not None
    assert execution.reply["status"] == "ok"
    rows = kernel.query("SELECT decision, decided_by, reason FROM tool_calls")
    assert [row[:2] for row in rows] == [("denied", "policy")], rows
    assert "no one can click" in rows[0][2]
    assert "print(6 * 7)" in execution.text()
    _stored_transcript_is_valid(kernel.db_path)


def test_stop_ends_the_cell_normally(kernel: KernelDriver) -> None:
    execution = kernel.execute("%%agent --model demo-slow --tools none\nTell me a long story.")
    kernel.wait(lambda: bool(kernel.view_comms()), 30, "the view")
    kernel.wait(lambda: len(kernel.comm_messages) >= 3, 30, "text to stream")
    (view,) = kernel.view_comms()
    kernel.send_custom(view, {"type": "stop"})
    kernel.finish(execution, 10, "the cell to end after Stop")
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    assert 'data-status="stopped"' in execution.text()
    _stored_transcript_is_valid(kernel.db_path)


@pytest.mark.parametrize("moment", ["streaming", "approval"])
def test_kernel_interrupt_gives_one_line_and_a_valid_transcript(
    kernel: KernelDriver, moment: str
) -> None:
    if moment == "streaming":
        execution = kernel.execute("%%agent --model demo-slow --tools none\nTell me a story.")
        kernel.wait(lambda: len(kernel.comm_messages) >= 3, 30, "text to stream")
    else:
        execution = kernel.execute(RUN_PYTHON_CELL)
        _wait_for_approval(kernel)
    kernel.manager.interrupt_kernel()
    kernel.finish(execution, 10, "the cell to end after the interrupt")
    reply = execution.reply
    assert reply is not None
    assert reply["status"] == "error"
    assert reply["ename"] == "AgentInterrupted"
    errors = [o["content"] for o in execution.outputs if o["msg_type"] == "error"]
    assert [len(e["traceback"]) for e in errors] == [1], errors
    _stored_transcript_is_valid(kernel.db_path)
    follow = kernel.run("1 + 1")
    assert "2" in follow.text()


def test_a_queued_cell_reaches_the_running_agent_and_is_not_run_twice(
    kernel: KernelDriver,
) -> None:
    execution = kernel.execute("%%agent --model demo-slow --tools none\nTell me a story.")
    kernel.wait(lambda: len(kernel.comm_messages) >= 2, 30, "text to stream")
    queue = kernel.open_comm(
        "mibyan_jupyter.queue", {"source": "%%agent\nAnd make it short.", "cell_id": "cell-2"}
    )
    kernel.wait(lambda: bool(kernel.comm_replies(queue)), 10, "the queue's reply")
    assert kernel.comm_replies(queue)[0]["queued"] is True
    kernel.finish(execution, 60, "the first cell to finish")
    prompts = [row[0] for row in kernel.query("SELECT text FROM messages WHERE role = 'user'")]
    assert any("And make it short." in (p or "") for p in prompts), prompts
    second = kernel.run("%%agent\nAnd make it short.", cell_id="cell-2")
    assert "mibyan-queued-note" in second.text()
    count = kernel.query("SELECT count(*) FROM messages WHERE role = 'user'")[0][0]
    assert count == 2


def test_always_is_saved_and_honoured_by_later_cells_and_sessions(kernel: KernelDriver) -> None:
    execution = kernel.execute(RUN_PYTHON_CELL)
    call_id, view = _wait_for_approval(kernel)
    kernel.send_custom(
        view, {"type": "decision", "call_id": call_id, "action": "approve", "scope": "always"}
    )
    kernel.finish(execution, 30, "the first run")
    assert kernel.query("SELECT tool, approved FROM approval_rules") == [("run_python", 1)]
    later = kernel.run(RUN_PYTHON_CELL.replace("--tools python", "--tools python --session new"))
    assert (later.reply or {}).get("status") == "ok"
    decisions = kernel.query("SELECT decision, decided_by, scope FROM tool_calls ORDER BY rowid")
    # the second was decided by the saved rule, not by the user (jupyter/guard.py)
    assert decisions == [("approved", "user", "always"), ("approved", "rule", "always")]
