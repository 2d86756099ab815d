"""The ``clarify`` tool in JupyterLab: the model (the loopback fake server) asks a question on
the cell's ask card. With choices, a click on one answers; without, an answer typed in the
card's text box and Enter answers. Either way the model's next request carries the answer
as the tool's result. A typed answer is the user's untrusted text: the card shows it as
text (``<b>`` stays characters), never as markup. The run is then held on an approval
card so the answered question can be looked at before the static transcript replaces the
live view; Deny ends it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

SETUP = "%load_ext mibyan_jupyter"
ASK_JS = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask:not(.mibyan-decided)')"
ANSWERED_JS = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask.mibyan-decided')"
HOLD = FakeCall("run_python", {"code": "print(6 * 7)"})
TYPED = "the file sales.csv <b>not bold</b>"


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def tool_results(server: FakeProviderServer, at: int) -> list[str]:
    body = server.requests[at].body
    assert body is not None
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def ask_and_answer(lab: Lab, server: FakeProviderServer, name: str, question: dict[str, object]):  # type: ignore[no-untyped-def]
    """Open a notebook whose agent cell asks ``question``, wait for the ask card; the card."""
    server.push(
        FakeReply(calls=[FakeCall("clarify", question)]),
        FakeReply(calls=[HOLD]),
        FakeReply("done"),
    )
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(name, [SETUP, f"%%agent --model {model} --tools python,clarify\nPlot it."])
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_while_running(1, ASK_JS, "clarify's ask card")
    card = lab.view(1).locator(".mibyan-ask")
    assert text(card.locator(".mibyan-ask-question")) == question["question"]
    return card


def held_then_denied(lab: Lab) -> None:
    lab.wait_while_running(1, ANSWERED_JS, "the answered card")
    approval = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval .mibyan-deny')"
    lab.wait_while_running(1, approval, "the held approval card")


def deny(lab: Lab) -> None:
    lab.view(1).locator(".mibyan-approval button.mibyan-deny").click()
    lab.wait_transcript(1)


def test_a_choice_clicked_is_the_answer(lab: Lab, server: FakeProviderServer) -> None:
    question = {"question": "Which year should I plot?", "choices": ["2023", "2024"]}
    card = ask_and_answer(lab, server, "clarify-choice.ipynb", question)
    labels = [text(b) for b in card.locator("button.mibyan-ask-choice").all()]
    assert labels == ["2023", "2024", "Let the agent decide"], labels
    before = len(server.requests)
    lab.screenshot("clarify-choices")
    card.locator("button.mibyan-ask-choice[data-value='c1']").click()
    held_then_denied(lab)
    assert "chosen: 2024" in text(card.locator(".mibyan-ask-outcome"))
    assert tool_results(server, before) == ["The user chose: 2024"]
    lab.screenshot("clarify-choice-answered")
    deny(lab)


def test_a_typed_answer_and_enter_is_the_answer(lab: Lab, server: FakeProviderServer) -> None:
    card = ask_and_answer(lab, server, "clarify-typed.ipynb", {"question": "Which data?"})
    assert [text(b) for b in card.locator("button.mibyan-ask-choice").all()] == [
        "Let the agent decide"
    ]
    box = card.locator("input.mibyan-ask-text")
    assert box.get_attribute("placeholder") == "Type your answer, then Enter"
    before = len(server.requests)
    box.fill(TYPED)
    lab.screenshot("clarify-typing")
    box.press("Enter")
    held_then_denied(lab)
    outcome = card.locator(".mibyan-ask-outcome")
    assert text(outcome) == f"answered: {TYPED}"
    assert outcome.locator("b").count() == 0, "the typed text is shown as text"
    assert box.is_disabled()
    assert tool_results(server, before) == [f"The user answered: {TYPED}"]
    lab.screenshot("clarify-typed-answered")
    deny(lab)
