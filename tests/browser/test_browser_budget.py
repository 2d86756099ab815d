"""The budget's question in JupyterLab: when ``--max-turns 1`` is reached the run pauses
before its summary call and the ask card offers "Continue (+1 turn)" and "Summarize now".
Continue lets the same run go on (the demo model then reports what its tool returned, so
the cell ends "completed"); Summarize now makes the one summary call. Either way the
budget's instruction is never shown as a "You" message.

The demo model calls the tool the prompt names (``list_variables``, which runs without
asking), and answers with the tool's result on the next turn.
"""

from __future__ import annotations

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"
CELL = "%%agent --tools inspect --max-turns 1\nPlease call list_variables."


def _ask_card(lab: Lab, notebook: str) -> object:
    lab.open_notebook(notebook, [LOAD, CELL])
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_while_running(
        1, "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask')", "budget ask card"
    )
    card = lab.view(1).locator(".mibyan-ask")
    question = text(card.locator(".mibyan-ask-question"))
    assert "turns (1 of 1)" in question, question
    labels = [text(b) for b in card.locator("button.mibyan-ask-choice").all()]
    assert labels == ["Continue (+1 turn)", "Summarize now"], labels
    return card


def _no_budget_you_message(lab: Lab) -> None:
    transcript = lab.wait_transcript(1)
    for block in transcript.locator(".mibyan-user").all_text_contents():
        assert "[budget]" not in block, f"the budget's instruction is shown as You: {block!r}"


@pytest.mark.timeout(120)
def test_continue_after_a_budget_stop_goes_on_in_the_same_run(lab: Lab) -> None:
    card = _ask_card(lab, "budget-continue.ipynb")
    lab.screenshot("budget-ask-card")
    card.locator("button.mibyan-ask-choice[data-value='continue']").click()  # type: ignore[attr-defined]

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    answer = text(transcript.locator(".mibyan-assistant").last)
    assert "list_variables" in answer, answer
    assert "returned" in answer, answer
    _no_budget_you_message(lab)
    lab.screenshot("budget-continued")


@pytest.mark.timeout(120)
def test_summarize_now_makes_the_one_summary_call(lab: Lab) -> None:
    card = _ask_card(lab, "budget-summarize.ipynb")
    card.locator("button.mibyan-ask-choice[data-value='summarize']").click()  # type: ignore[attr-defined]

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "budget_exhausted"
    _no_budget_you_message(lab)
    lab.screenshot("budget-summarized")
