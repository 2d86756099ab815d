"""The kernel tools through a real Agent (scripted model, auto-approving gate): every group
end to end, approval asked exactly for the side-effecting calls, and the transcript exports
as a notebook whose code cell holds the run_python outputs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    Agent,
    ApprovalGate,
    ApprovalRequested,
    AutoApprove,
    ImagePart,
    ToolExecutionEnd,
    ToolMessage,
)
from mibyan_jupyter.core.fakes import Call, Reply, ScriptedModel
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.export import SessionMeta, export_notebook
from mibyan_jupyter.jupyter.kernel_tools import TOOL_GROUPS, kernel_tools

CODE = (
    "import matplotlib.pyplot as plt\n"
    "total = float(df['price'].sum())\n"
    "print('total', total)\n"
    "plt.plot(df['price'])\n"
    "total * 2"
)


@pytest.fixture(autouse=True)
def agg_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    plt.switch_backend("Agg")


def pid_in(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


def running(pid: int) -> bool:
    """Whether ``pid`` runs (an unreaped zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def results(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.name: m for m in messages if isinstance(m, ToolMessage)}


async def test_all_groups_end_to_end(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"df": pd.DataFrame({"price": [1.0, 2.0, 4.5]})}
    model = ScriptedModel(
        [
            Reply(calls=[Call("list_variables"), Call("describe_variable", {"name": "df"})]),
            Reply(calls=[Call("run_python", {"code": CODE})]),
            Reply(
                calls=[
                    Call("write_file", {"path": "out/total.txt", "content": "15.0\n"}),
                    Call("run_shell", {"command": "cat out/total.txt && ls out"}),
                    Call("read_file", {"path": "out/total.txt"}),
                    Call("list_folder", {"path": "out"}),
                ]
            ),
            Reply("The total is 7.5; twice that is 15.0."),
        ]
    )
    agent = Agent(
        stream_fn=model,
        tools=kernel_tools(TOOL_GROUPS, namespace=namespace, root=tmp_path),
        approval=ApprovalGate(approver=AutoApprove()),
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    messages = await agent.prompt("What is the total price?")
    check_grammar(recorder.events)

    asked = [e.name for e in recorder.of(ApprovalRequested)]
    assert asked == ["run_python", "write_file", "run_shell"]
    ended = recorder.of(ToolExecutionEnd)
    assert [e.is_error for e in ended] == [False] * 7

    by_name = results(messages)
    assert "df: pandas.DataFrame, (3, 1)" in content_text(by_name["list_variables"].content)
    assert "price: float64 (0 null)" in content_text(by_name["describe_variable"].content)
    python = by_name["run_python"]
    assert content_text(python.content).startswith("total 7.5\nOut: 15.0\n[image 1, attached]")
    assert isinstance(python.content, tuple)
    assert any(isinstance(p, ImagePart) for p in python.content)
    assert namespace["total"] == 7.5
    assert (tmp_path / "out" / "total.txt").read_text() == "15.0\n"
    assert content_text(by_name["run_shell"].content) == "15.0\ntotal.txt\n[exit code 0]"
    assert content_text(by_name["read_file"].content) == "15.0\n"
    assert content_text(by_name["list_folder"].content) == "out: 1 entry\ntotal.txt (5 B)"

    # the model saw the image: the next request carried it
    sent = [m for m in model.requests[2].messages if isinstance(m, ToolMessage)]
    assert any(
        isinstance(p, ImagePart) for m in sent if not isinstance(m.content, str) for p in m.content
    )

    notebook = export_notebook(agent.state.messages, session=SessionMeta(id="kernel-tools"))
    nbformat.validate(notebook)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == [CODE]
    kinds = [o["output_type"] for o in code_cells[0].outputs]
    assert kinds == ["stream", "execute_result", "display_data"]
    assert "image/png" in code_cells[0].outputs[2]["data"]


async def test_denied_python_never_runs_and_is_not_a_code_cell(tmp_path: Path) -> None:
    class Deny:
        async def __call__(self, request: Any, signal: Any) -> Any:
            from mibyan_jupyter.core import Denied

            return Denied("not on my data")

    namespace: dict[str, Any] = {}
    model = ScriptedModel(
        [Reply(calls=[Call("run_python", {"code": "ran = True"})]), Reply("Understood.")]
    )
    agent = Agent(
        stream_fn=model,
        tools=kernel_tools(["python"], namespace=namespace, root=tmp_path),
        approval=ApprovalGate(approver=Deny()),
    )
    messages = await agent.prompt("go")
    assert "ran" not in namespace
    assert results(messages)["run_python"].is_error
    notebook = export_notebook(agent.state.messages, session=SessionMeta(id="denied"))
    assert [c for c in notebook.cells if c.cell_type == "code"] == []


async def test_stopping_the_agent_kills_a_running_command(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Reply(calls=[Call("run_shell", {"command": "echo $$ > shell.pid; sleep 30"})]),
            Reply("never reached"),
        ]
    )
    agent = Agent(
        stream_fn=model,
        tools=kernel_tools(["shell"], namespace={}, root=tmp_path),
        approval=ApprovalGate(approver=AutoApprove()),
    )
    run = asyncio.ensure_future(agent.prompt("sleep"))
    pid = None
    for _ in range(500):
        pid = pid_in(tmp_path / "shell.pid")
        if pid is not None:
            break
        await asyncio.sleep(0.01)
    assert pid is not None
    agent.abort()
    messages = await asyncio.wait_for(run, 5)
    result = results(messages)["run_shell"]
    assert result.is_error
    assert "cancelled" in content_text(result.content).lower()
    for _ in range(300):
        if not running(pid):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the command survived the stop")
