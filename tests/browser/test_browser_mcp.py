"""An MCP server's tool in JupyterLab: a real stdio server (the SDK's FastMCP,
tests/mcp/servers/demo.py) configured in the notebook folder's ``.jupyter/mcp.json``; the
cell's approval card names the server, Approve runs the call and the transcript shows its
result; and the folder's trust card, clicked, starts the server for the cell.

The demo model calls the tool the prompt names with the prompt's inline code as its
argument: ``weather`` answers ``{"city": ..., "celsius": 21.5}``, a number that appears
nowhere in the prompt, so it can only come from the server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

SERVER = Path(__file__).parents[1] / "mcp" / "servers" / "demo.py"
LOAD = "%load_ext mibyan_jupyter"
CALL = "%%agent --tools mcp:demo\nCall `demo__weather` for `Oslo`."
APPROVE_JS = (
    "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval button.mibyan-approve')"
)
TRUST_JS = (
    "(cell) => [...cell.node.querySelectorAll('.mibyan-view .mibyan-ask')]"
    ".some((card) => card.textContent.includes('Trust the MCP servers'))"
)


def folder_file(lab: Lab) -> Path:
    path = lab.folder_path / ".jupyter" / "mcp.json"
    path.parent.mkdir(exist_ok=True)
    entry = {"command": sys.executable, "args": [str(SERVER), "stdio"]}
    path.write_text(json.dumps({"mcpServers": {"demo": entry}}))
    return path


def approve_and_see_the_result(lab: Lab, index: int) -> None:
    lab.wait_while_running(index, APPROVE_JS, "the approval card", timeout_ms=40_000)
    card = lab.view(index).locator(".mibyan-approval")
    assert "demo__weather" in text(card.locator(".mibyan-approval-title"))
    assert text(card.locator(".mibyan-approval-server")) == "(server demo)"
    lab.screenshot("mcp-approval-card")
    card.locator("button.mibyan-approve").click()
    transcript = lab.wait_transcript(index)
    assert transcript.get_attribute("data-status") == "completed"
    tool = text(transcript.locator(".mibyan-tool").first)
    assert "21.5" in tool, f"the server's result is not on the tool card: {tool!r}"
    assert "21.5" in text(transcript.locator(".mibyan-assistant").last)


@pytest.mark.timeout(150)
def test_the_card_names_the_server_and_approve_shows_the_result(lab: Lab) -> None:
    path = folder_file(lab)
    lab.open_notebook("mcp.ipynb", [LOAD, "%agent mcp trust", CALL])
    lab.run_cell(0)
    trusted = lab.run_cell(1)  # a cell the user runs may trust the folder's file
    assert f"Trusted {path}" in trusted
    lab.start_cell(2)
    approve_and_see_the_result(lab, 2)


@pytest.mark.timeout(150)
def test_the_trust_card_clicked_starts_the_folders_server(lab: Lab) -> None:
    path = folder_file(lab)
    lab.open_notebook("mcp-trust.ipynb", [LOAD, "%config AgentMagics.headless_wait = 20", CALL])
    lab.run_cell(0)
    lab.run_cell(1)
    lab.start_cell(2)
    either = f"(cell) => ({TRUST_JS})(cell) || ({APPROVE_JS})(cell)"  # unwired: no card, fail fast
    lab.wait_while_running(2, either, "the trust card", timeout_ms=40_000)
    card = lab.view(2).locator(".mibyan-ask").filter(has_text="Trust the MCP servers")
    question = text(card.locator(".mibyan-ask-question"))
    assert str(path) in question
    assert str(SERVER) in question  # the command it starts is shown before it starts
    lab.screenshot("mcp-trust-card")
    card.locator("button.mibyan-ask-choice[data-value='trust']").click()
    approve_and_see_the_result(lab, 2)
