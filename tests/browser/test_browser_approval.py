"""The approval card in JupyterLab: the agent asks before ``run_python`` runs; Approve runs it
and the answer carries its result, Deny (with a reason) tells the model and it answers
without the result.

The demo model runs the first ```python block of the prompt, so ``print(6 * 7)`` gives a
result, 42, that appears nowhere in the prompt: it can only come from the tool running.
"""

from __future__ import annotations

import re

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"
ASK_PYTHON = "%%agent --tools python\nUse run_python to compute this:\n```python\nprint(6 * 7)\n```"
FORTY_TWO = re.compile(r"\b42\b")


def _wait_for_approval_card(lab: Lab, index: int) -> None:
    lab.wait_while_running(
        index,
        "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval button.mibyan-approve')",
        "approval card",
    )
    assert lab.view(index).get_attribute("data-status") == "awaiting_approval"
    card = lab.view(index).locator(".mibyan-approval")
    card.wait_for(state="visible")
    assert "6 * 7" in text(card.locator(".mibyan-approval-args"))
    lab.screenshot("approval-card")


@pytest.mark.timeout(120)
def test_approve_runs_the_tool_and_the_answer_has_its_result(lab: Lab) -> None:
    lab.open_notebook("approve.ipynb", [LOAD, ASK_PYTHON])
    lab.run_cell(0)
    lab.start_cell(1)
    _wait_for_approval_card(lab, 1)

    lab.view(1).locator(".mibyan-approval button.mibyan-approve").click()

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    # The code blocks' own text (their Copy / Insert buttons are not part of it).
    without_buttons = "(pre) => { const c = pre.cloneNode(true); c.querySelectorAll('button')"
    without_buttons += ".forEach((b) => b.remove()); return c.textContent; }"
    pres = transcript.locator(".mibyan-tool").first.locator("pre").all()
    blocks = [pre.evaluate(without_buttons) for pre in pres]
    assert any(FORTY_TWO.search(block) for block in blocks), f"no result 42 in {blocks!r}"
    answer = text(transcript.locator(".mibyan-assistant").last)
    assert re.search(r"run_python\W+returned\W+42\b", answer), (
        f"the final answer does not report the result: {answer!r}"
    )


@pytest.mark.timeout(120)
def test_deny_with_reason_tells_the_model_and_it_answers_without_the_result(lab: Lab) -> None:
    lab.open_notebook("deny.ipynb", [LOAD, ASK_PYTHON])
    lab.run_cell(0)
    lab.start_cell(1)
    _wait_for_approval_card(lab, 1)

    card = lab.view(1).locator(".mibyan-approval")
    card.locator("input.mibyan-deny-reason").fill("not now")
    card.locator("button.mibyan-deny").click()

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    tool = text(transcript.locator(".mibyan-tool").first)
    assert "denied" in tool.lower(), f"the tool block does not show the denial: {tool!r}"
    answer = text(transcript.locator(".mibyan-assistant").last)
    assert "not now" in answer, f"the model was not told the reason: {answer!r}"
    assert "failed" in answer or "denied" in answer.lower(), (
        f"the answer does not say the call was refused: {answer!r}"
    )
    for block in transcript.locator(".mibyan-tool, .mibyan-assistant").all_text_contents():
        assert not FORTY_TWO.search(block), f"a denied call produced its result: {block!r}"
