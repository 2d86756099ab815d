"""``%%agent`` running run_python in a real ipykernel (ipykernel's own fd capture on, as in
JupyterLab): what ``os.system`` prints reaches the tool's result and the card redacted and
never the cell's output or any iopub message unredacted; the card's output grows while the
code still runs; Stop sent over a kernel subshell (as JupyterLab 4.6 sends widget comms)
ends a blocking ``time.sleep(30)`` within about a second, "stopped"; Kernel > Interrupt
during the tool ends the cell with one red line and the queued next cell is not run;
run_shell's output streams to its card too (as events: the loop is free while it runs)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_driver import KernelDriver

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

SECRET = "sk-kernel-fd-0123456789abcdef"


def cell(code: str) -> str:
    return (
        f"%%agent --tools python --approve auto\nUse run_python to compute:\n```python\n{code}\n```"
    )


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    driver = KernelDriver(tmp_path, env={"FDK_API_KEY": SECRET})
    try:
        assert driver.run("%load_ext mibyan_jupyter").reply["status"] == "ok"  # type: ignore[index]
        yield driver
    finally:
        driver.close()


def view_ops(kernel: KernelDriver) -> list[Any]:
    """Every item of every batch the views sent (ops and delta strings)."""
    items: list[Any] = []
    for message in kernel.comm_messages:
        data = message.get("data", {})
        if data.get("method") == "custom" and isinstance(data.get("content"), list):
            items += data["content"][1:]
    return items


def tool_output(kernel: KernelDriver) -> str:
    ops = [op for op in view_ops(kernel) if isinstance(op, dict)]
    return "".join(op["text"] for op in ops if op.get("op") == "tool_output")


def render(kernel: KernelDriver) -> str:
    kernel.wait(lambda: bool(kernel.view_comms()), 60, "the view")
    (view,) = kernel.view_comms()
    kernel.send_custom(view, {"type": "rendered"})
    return view


def test_system_output_is_captured_redacted_and_streams_while_the_code_runs(
    kernel: KernelDriver,
) -> None:
    code = (
        "import os, time\nos.system('echo key=$FDK_API_KEY')\n"
        "for i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.3)"
    )
    execution = kernel.execute(cell(code))
    render(kernel)
    kernel.wait(lambda: "tick 1" in tool_output(kernel), 30, "live output")
    assert not execution.idle, "the card's output must grow while the code runs"
    assert "tick 5" not in tool_output(kernel)
    kernel.finish(execution, 30, "the run to finish")
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    assert "key=[redacted]" in tool_output(kernel)
    everything = json.dumps([kernel.comm_messages, execution.outputs], default=str)
    assert SECRET not in everything
    streams = [o for o in execution.outputs if o["msg_type"] == "stream"]
    assert not any("key=" in o["content"]["text"] for o in streams), streams
    (stored,) = kernel.query("SELECT data FROM messages WHERE role = 'tool'")
    assert "key=[redacted]" in stored[0]
    assert SECRET not in stored[0]


def create_subshell(kernel: KernelDriver) -> str:
    client = kernel.client
    client.control_channel.send(client.session.msg("create_subshell_request", {}))
    reply = client.get_control_msg(timeout=10)
    return str(reply["content"]["subshell_id"])


def send_over_subshell(kernel: KernelDriver, comm_id: str, subshell: str, content: Any) -> None:
    data = {"method": "custom", "content": content}
    message = kernel.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    message["header"]["subshell_id"] = subshell
    kernel.client.shell_channel.send(message)


def test_stop_over_a_subshell_ends_blocking_code_within_a_second(kernel: KernelDriver) -> None:
    subshell = create_subshell(kernel)
    execution = kernel.execute(cell("import time\nprint('sleeping', flush=True)\ntime.sleep(30)"))
    view = render(kernel)
    kernel.wait(lambda: "sleeping" in tool_output(kernel), 30, "the code to start")
    sent = time.monotonic()
    send_over_subshell(kernel, view, subshell, {"type": "stop"})
    kernel.finish(execution, 10, "the cell to end after Stop")
    elapsed = time.monotonic() - sent
    assert elapsed < 1.5, elapsed
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    statuses = [op["status"] for op in view_ops(kernel) if isinstance(op, dict) and "status" in op]
    assert "stopped" in statuses, statuses
    assert 'data-status="stopped"' in execution.text()
    assert kernel.run("1 + 1").reply["status"] == "ok"  # type: ignore[index]


def test_interrupt_during_run_python_is_one_red_line_and_run_all_stops(
    kernel: KernelDriver,
) -> None:
    execution = kernel.execute(cell("import time\nprint('sleeping', flush=True)\ntime.sleep(30)"))
    following = kernel.execute("ran_after = True")  # Run All's next cell, queued
    render(kernel)
    kernel.wait(lambda: "sleeping" in tool_output(kernel), 30, "the code to start")
    kernel.manager.interrupt_kernel()
    kernel.finish(execution, 10, "the cell to end after the interrupt")
    reply = execution.reply
    assert reply is not None
    assert reply["status"] == "error", reply
    assert reply["ename"] == "AgentInterrupted"
    errors = [o["content"] for o in execution.outputs if o["msg_type"] == "error"]
    assert [len(e["traceback"]) for e in errors] == [1], errors
    kernel.finish(following, 10, "the queued cell's reply")
    assert (following.reply or {}).get("status") == "aborted", following.reply


def test_run_shell_output_streams_to_its_card_while_the_command_runs(
    kernel: KernelDriver,
) -> None:
    command = "echo key=$FDK_API_KEY; for i in 1 2 3 4 5 6; do echo step-$i; sleep 0.3; done"
    prompt = f"%%agent --tools shell --approve auto\nUse run_shell:\n```bash\n{command}\n```"
    execution = kernel.execute(prompt)
    render(kernel)
    kernel.wait(lambda: "step-2" in tool_output(kernel), 30, "live shell output")
    assert not execution.idle, "the card's output must grow while the command runs"
    assert "step-6" not in tool_output(kernel)
    kernel.finish(execution, 30, "the run to finish")
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    assert "key=[redacted]" in tool_output(kernel)
    assert SECRET not in json.dumps(kernel.comm_messages, default=str)
