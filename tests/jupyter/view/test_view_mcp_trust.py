"""The trust card of a folder's MCP file, on a real live view (its comm recorded) in a loaded
shell: the cell's tool sources are prepared (``prepare_sources``), the card names the file and
every command it starts, Trust starts the server (a real stdio FastMCP server) and the cell
gets its tools, Not now and headless runs get one line and no tools, and the approval card
of a server's tool names the server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from view_support import HEADER, Recorder, click, record_comms

from mibyan_jupyter.core.events import ApprovalRequested
from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.plan import plan_cell
from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
from mibyan_jupyter.jupyter.cell.tool_sources import cell_tools, prepare_sources
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.mcp.trust import trust_path

pytestmark = pytest.mark.slow  # each test starts a real server process (~1 s)

SERVER = Path(__file__).parents[2] / "mcp" / "servers" / "secret_echo.py"


@pytest.fixture
def folder(
    loaded_shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The notebook folder (the shell's cwd) with a .jupyter/mcp.json of one server."""
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / ".jupyter" / "mcp.json"
    path.parent.mkdir()
    entry = {"command": sys.executable, "args": [str(SERVER)]}
    path.write_text(json.dumps({"mcpServers": {"here": entry}}))
    yield path.resolve()
    from mibyan_jupyter.mcp.hub import kernel_hub

    kernel_hub().stop_all()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def plan(line: str = "--tools mcp:here", *, headless: bool = False) -> CellPlan:
    return plan_cell("hi", line, kernel_state().defaults, headless=headless)


def built(cell: CellPlan, view: AgentView | None) -> list[str]:
    """The names of the cell's tools, as configure_agent builds them."""
    setting = ToolSetting(
        plan=cell,
        agent=None,
        approval=None,
        namespace={},
        root=Path.cwd(),
        view=view,  # type: ignore[arg-type]
    )
    return [tool.name for tool in cell_tools(setting)]


async def until(condition: Callable[[], Any]) -> Any:
    for _ in range(1000):
        if found := condition():
            return found
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_trust_clicked_starts_the_folders_server(
    folder: Path, recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    view = AgentView(HEADER)
    cell = plan()
    click(view, {"type": "rendered", "next": 0})
    task = asyncio.create_task(prepare_sources(cell, view))
    (card,) = await until(lambda: recorder.ops("ask"))
    assert card["question"] == (
        f"Trust the MCP servers of {folder}? It starts: here ({sys.executable} {SERVER})"
    )
    assert [c["value"] for c in card["choices"]] == ["trust", "not_now"]
    assert card["default"] == "not_now"
    click(view, {"type": "answer", "ask_id": card["id"], "choice": "trust"})
    await asyncio.wait_for(task, 30)
    assert {"here__echo", "here__secret_seen"} <= set(built(cell, view))
    (entry,) = json.loads(trust_path().read_text())["trusted"]
    assert entry["file"] == str(folder)
    assert "not trusted" not in capsys.readouterr().err
    view(ApprovalRequested(call_id="c1", name="here__echo", args={"text": "x"}))
    (approval,) = await until(lambda: recorder.ops("approval"))
    assert approval["server"] == "server here"


async def test_not_now_runs_the_cell_without_them(
    folder: Path, recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    view = AgentView(HEADER)
    cell = plan()
    click(view, {"type": "rendered", "next": 0})
    task = asyncio.create_task(prepare_sources(cell, view))
    (card,) = await until(lambda: recorder.ops("ask"))
    click(view, {"type": "answer", "ask_id": card["id"], "choice": "not_now"})
    await asyncio.wait_for(task, 10)
    assert built(cell, view) == []
    assert not trust_path().exists()
    err = capsys.readouterr().err
    assert f"mibyan: {folder} is not trusted (Not now)" in err
    assert "runs without MCP server(s) here" in err
    notices = [op["text"] for op in recorder.ops("notice")]
    assert any("is not trusted (Not now)" in text for text in notices)


async def test_headless_nobody_is_asked_and_nothing_starts(
    folder: Path, recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    view = AgentView(HEADER)
    cell = plan(headless=True)
    await asyncio.wait_for(prepare_sources(cell, view), 10)
    assert recorder.ops("ask") == []
    assert built(cell, view) == []
    assert "is not trusted (headless: nobody can answer)" in capsys.readouterr().err


async def test_a_configured_folder_starts_without_asking(
    folder: Path, recorder: Recorder, loaded_shell: InteractiveShell
) -> None:
    loaded_shell.run_line_magic(
        "config", f"AgentMagics.mcp_trust_folders = [{str(folder.parents[1])!r}]"
    )
    cell = plan(headless=True)
    await asyncio.wait_for(prepare_sources(cell, None), 30)
    assert recorder.ops("ask") == []
    assert "here__echo" in built(cell, None)
    assert not trust_path().exists()  # configured, not written


async def test_without_preparing_the_cell_decides_as_headless(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert built(plan(), None) == []
    assert "is not trusted (nobody was asked)" in capsys.readouterr().err
