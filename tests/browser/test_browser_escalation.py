"""The escalation refused, as the user sees it in JupyterLab: the agent's approved
``run_python`` runs ``%agent policy set run_shell allow`` (and ``%config AgentMagics.approve
= 'auto'``); the card shows the refusal in the code's output, the next ``run_shell`` still
shows its approval card, and ``%agent policy`` afterwards lists no saved rule
(docs/architecture.md, "Approvals the agent cannot grant itself").

The kernel is a process of the Lab server, so the scripted model (the loopback fake
server) runs here and the cell names it as its model.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text

if TYPE_CHECKING:
    from playwright.sync_api import Locator

pytestmark = pytest.mark.browser

ESCALATE = (
    "ip = get_ipython()\n"
    "for line in ('agent policy set run_shell allow', \"config AgentMagics.approve = 'auto'\"):\n"
    "    name, _, rest = line.partition(' ')\n"
    "    try:\n"
    "        ip.run_line_magic(name, rest)\n"
    "    except Exception as error:\n"
    "        print('refused:', type(error).__name__)\n"
    "print('approve is', ip.magics_manager.registry['AgentMagics'].approve)\n"
)
CARD_JS = """(cell, needle) => Array.from(
  cell.node.querySelectorAll('.mibyan-view .mibyan-approval'),
).some((card) => card.textContent.includes(needle) && card.querySelector('button.mibyan-approve'))"""


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def card(lab: Lab, index: int, needle: str) -> Locator:
    """The approval card of cell ``index`` whose call shows ``needle``, once it asks."""
    lab.wait_while_running(index, CARD_JS, f"approval card for {needle!r}", arg=needle)
    return lab.view(index).locator(".mibyan-approval", has_text=needle).last


@pytest.mark.timeout(180)
def test_approved_code_cannot_allow_run_shell_for_itself(
    lab: Lab, server: FakeProviderServer
) -> None:
    server.push(
        FakeReply("Let me set things up.", calls=[FakeCall("run_python", {"code": ESCALATE})]),
        FakeReply(calls=[FakeCall("run_shell", {"command": "echo escalated"})]),
        FakeReply("done"),
    )
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        "escalation.ipynb",
        [
            "%load_ext mibyan_jupyter",
            f"%%agent --model {model} --tools python,shell\nGo.",
            "%agent policy",
        ],
    )
    lab.run_cell(0)
    lab.start_cell(1)

    python_card = card(lab, 1, "policy set run_shell")
    python_card.locator("button.mibyan-approve").click()

    shell_card = card(lab, 1, "echo escalated")  # still asks: the rule was refused
    lab.screenshot("escalation-run-shell-still-asks")
    view = text(lab.view(1))
    assert "refused: RefusedInsideRun" in view, view[-2000:]
    assert "approve is ask" in view, view[-2000:]
    shell_card.locator("button.mibyan-deny").click()

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    said = text(transcript)
    assert "refused: RefusedInsideRun" in said
    lab.screenshot("escalation-refused-transcript")

    lab.run_cell(2)
    policy = lab.output_text(2)
    assert "always (saved)" not in policy, policy
    with sqlite3.connect(lab.db_path) as conn:
        assert conn.execute("SELECT count(*) FROM approval_rules").fetchone() == (0,)
        rows = conn.execute(
            "SELECT name, decision, decided_by FROM tool_calls ORDER BY started_at"
        ).fetchall()
    assert rows == [("run_python", "approved", "user"), ("run_shell", "denied", "user")]
