"""``--compact ask`` in JupyterLab (issue 10, item 3; docs/long-sessions.md).

A cell whose conversation crosses the compaction threshold (a small ``--context-window``
over a history of long replies) asks first: the ask card offers "Compact now" and "Not
now". Compact: the summary call is made and the live view shows the compaction receipt.
Not now: no summary call, no receipt, and the request carries the conversation as it was.
The receipt lives in the live view, which the static transcript replaces when the run
ends, so the cell is held on an approval card while it is looked at (as in
test_browser_sessions_last.py), then Deny ends it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

SETUP = "%load_ext mibyan_jupyter"
SUMMARY = "The user asked for the variables thirty times; nothing was decided yet."
LONG = "lighthouse keeper logbook entry " * 30
RECEIPT = re.compile(r"\d+ messages summarised, \d+ → \d+ messages, [\d,]+ → [\d,]+ tokens")
LOOK = FakeCall("list_variables")
HOLD = FakeCall("run_python", {"code": "print(6 * 7)"})
ASK_JS = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask:not(.mibyan-decided)')"
APPROVAL_JS = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval .mibyan-deny')"


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def grow_then_ask(lab: Lab, server: FakeProviderServer, name: str) -> None:
    """Cell 1 builds a long history (at the fake model's own large window); cell 2, with
    a 6,000-token window and ``--compact ask``, must ask before its first model call."""
    server.push(*(FakeReply(LONG if n < 10 else f"look {n}", calls=[LOOK]) for n in range(30)))
    server.push(FakeReply("looked thirty times"))
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        name,
        [
            SETUP,
            f"%%agent --model {model} --tools inspect --max-turns 40\nLook thirty times.",
            "%%agent --tools inspect,python --context-window 6000 --compact ask\n"
            "Now compute something.",
        ],
    )
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"


def the_ask_card(lab: Lab, index: int) -> str:
    """Wait for the compaction's ask card; the session id the header shows meanwhile."""
    lab.wait_while_running(index, ASK_JS, "compaction ask card")
    card = lab.view(index).locator(".mibyan-ask")
    question = text(card.locator(".mibyan-ask-question"))
    assert re.search(r"Summarise \d+ older messages", question), question
    labels = [text(b) for b in card.locator("button.mibyan-ask-choice").all()]
    assert labels == ["Compact now", "Not now"], labels
    return text(lab.view(index).locator(".mibyan-session-id"))


def finish(lab: Lab, index: int) -> str:
    """Deny the held call and wait for the run's end; the transcript's text."""
    lab.view(index).locator(".mibyan-approval button.mibyan-deny").click()
    lab.wait_transcript(index)
    return text(lab.transcript(index))


def test_compact_now_summarises_and_shows_the_receipt(lab: Lab, server: FakeProviderServer) -> None:
    grow_then_ask(lab, server, "compact-ask.ipynb")
    before = len(server.requests)
    server.push(FakeReply(SUMMARY), FakeReply(calls=[HOLD]), FakeReply("not run, fine"))
    lab.start_cell(2)
    session = the_ask_card(lab, 2)
    assert len(server.requests) == before, "nothing is sent while the card waits"
    lab.screenshot("compact-ask-card")
    card = lab.view(2).locator(".mibyan-ask")
    card.locator("button.mibyan-ask-choice[data-value='compact']").click()
    lab.wait_while_running(2, APPROVAL_JS, "approval card")

    assert card.get_attribute("data-answer") == "compact"
    assert "chosen: Compact now" in text(card.locator(".mibyan-ask-outcome"))
    receipt = lab.view(2).locator(".mibyan-notice[data-kind='compaction']")
    assert receipt.count() == 1, lab.output_text(2)[:2000]
    assert RECEIPT.search(text(receipt)), text(receipt)
    child = text(lab.view(2).locator(".mibyan-session-id"))
    assert child != session, "the cell goes on in the compaction's child session"
    summary = str(server.requests[before].body)
    assert "lighthouse keeper" in summary, "the summary call was shown the old messages"
    after = str(server.requests[before + 1].body)
    assert SUMMARY in after
    assert "lighthouse keeper" not in after, "the middle was replaced by the summary"
    lab.screenshot("compact-ask-receipt")
    assert RECEIPT.search(finish(lab, 2)), "the saved transcript keeps the receipt"


def test_not_now_keeps_the_conversation_and_shows_no_receipt(
    lab: Lab, server: FakeProviderServer
) -> None:
    grow_then_ask(lab, server, "keep-ask.ipynb")
    before = len(server.requests)
    server.push(FakeReply(calls=[HOLD]), FakeReply("not run, fine"))
    lab.start_cell(2)
    session = the_ask_card(lab, 2)
    card = lab.view(2).locator(".mibyan-ask").first
    card.locator("button.mibyan-ask-choice[data-value='keep']").click()
    lab.wait_while_running(2, APPROVAL_JS, "approval card")

    assert card.get_attribute("data-answer") == "keep"
    assert "chosen: Not now" in text(card.locator(".mibyan-ask-outcome"))
    assert lab.view(2).locator(".mibyan-notice[data-kind='compaction']").count() == 0
    assert len(server.requests) == before + 1, "no summary call was made"
    assert text(lab.view(2).locator(".mibyan-session-id")) == session, "the same session"
    sent = str(server.requests[before].body)
    assert sent.count("lighthouse keeper logbook entry") >= 10 * 30, "sent as it was"
    lab.screenshot("keep-ask-no-receipt")
    assert "messages summarised" not in finish(lab, 2)
