"""Sessions that last, as the user sees them in JupyterLab (docs/long-sessions.md):

* a compaction's receipt shows in the running cell, its summary collapsed under it and
  readable on a click;
* the notes sent with a request (a budget warning once a budget passes 70 %) show as a
  notice, never as a "You" message;
* ``%agent memory add ...`` then ``%agent memory`` shows the entry in a table;
* a second notebook resuming the session an idle first kernel holds gets the ask card
  (Fork / Take it over / Cancel); Fork continues in a new session, and the header says so;
* a tool result over 16,000 characters shows its preview, and its load button brings the
  whole text from the store (the model was sent the preview only).

The kernels are processes of the Lab server, so the fake provider runs here on 127.0.0.1
and the cells name it as their model (README, "Try it without a key"). The receipt and the
notes (and the spilled result's load button) live in the live view, which the static
transcript replaces when the run ends; so the cell is held on an approval card while they
are looked at, then Deny ends it.
One module, so one JupyterLab and one Chromium serve them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

SETUP = (
    "import os\n"
    "os.environ['MIBYAN_MEMORY_DIR'] = os.path.join(os.getcwd(), 'memory')\n"
    "%load_ext mibyan_jupyter"
)
SUMMARY = "The user asked for the variables thirty times; nothing was decided yet."
RECEIPT = re.compile(r"\d+ messages summarised, \d+ → \d+ messages, [\d,]+ → [\d,]+ tokens")
"""The receipt: messages summarised, messages and tokens before -> after."""
LOOK = FakeCall("list_variables")
APPROVAL_JS = "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval .mibyan-deny')"


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def hold_on_approval(lab: Lab, index: int) -> None:
    """Wait until cell ``index`` asks to approve a call (the run waits for the click)."""
    lab.wait_while_running(index, APPROVAL_JS, "approval card")


def deny_and_finish(lab: Lab, index: int) -> None:
    lab.view(index).locator(".mibyan-approval button.mibyan-deny").click()
    lab.wait_transcript(index)


def test_the_compaction_receipt_shows_with_its_summary_expandable(
    lab: Lab, server: FakeProviderServer
) -> None:
    long = "lighthouse keeper logbook entry " * 30
    server.push(*(FakeReply(long if n < 10 else f"look {n}", calls=[LOOK]) for n in range(30)))
    server.push(FakeReply("looked thirty times"))
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        "compact.ipynb",
        [
            SETUP,
            f"%%agent --model {model} --tools inspect --max-turns 40\nLook at the variables thirty times.",
            "%%agent --tools inspect,python --context-window 6000\nNow compute something.",
        ],
    )
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"
    server.push(
        FakeReply(SUMMARY),
        FakeReply(calls=[FakeCall("run_python", {"code": "print(6 * 7)"})]),
        FakeReply("not run, fine"),
    )
    lab.start_cell(2)
    hold_on_approval(lab, 2)

    receipt = lab.view(2).locator(".mibyan-notice[data-kind='compaction']")
    assert receipt.count() == 1, lab.output_text(2)[:2000]
    said = text(receipt)
    assert RECEIPT.search(said), said
    summary = receipt.locator("details.mibyan-notice-detail")
    assert summary.get_attribute("open") is None, "the summary starts collapsed"
    assert not receipt.locator("pre").is_visible()
    summary.locator("summary").click()
    assert receipt.locator("pre").is_visible()
    assert SUMMARY in (receipt.locator("pre").inner_text())
    lab.screenshot("compaction-receipt-expanded")
    deny_and_finish(lab, 2)


def test_notes_show_as_a_notice_never_as_a_you_message(
    lab: Lab, server: FakeProviderServer
) -> None:
    server.push(
        FakeReply("first look", calls=[LOOK]),
        FakeReply("second look", calls=[LOOK]),
        FakeReply("third look", calls=[LOOK]),
        FakeReply(calls=[FakeCall("run_python", {"code": "print(1)"})]),
        FakeReply("done"),
    )
    model = f"fake:demo@{server.base_url}"
    prompt = "Look at the variables, then run something."
    lab.open_notebook(
        "notes.ipynb",
        [SETUP, f"%%agent --model {model} --tools inspect,python --max-turns 4\n{prompt}"],
    )
    lab.run_cell(0)
    lab.start_cell(1)
    hold_on_approval(lab, 1)

    view = lab.view(1)
    notes = view.locator(".mibyan-notice[data-kind='notes']")
    shown = [text(notes.nth(i)) for i in range(notes.count())]
    warnings = [n for n in shown if "[budget] 75 % of the turns budget is used (3 of 4)" in n]
    assert warnings, f"no budget warning among the notices: {shown}"
    users = [text(u).strip() for u in view.locator(".mibyan-user").all()]
    assert users == [prompt], f"a note was shown as something the user said: {users}"
    lab.screenshot("notes-as-notices")
    lab.view(1).locator(".mibyan-approval button.mibyan-deny").click()
    # The fourth call used the last turn: the run pauses and asks before its summary.
    lab.wait_while_running(
        1, "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask')", "budget ask card"
    )
    lab.view(1).locator(".mibyan-ask button.mibyan-ask-choice[data-value='summarize']").click()
    lab.wait_transcript(1)
    body = str(server.requests[3].body)
    assert "[budget]" in body, "the warning was sent with the fourth request"


def test_memory_add_then_memory_shows_the_entry_in_a_table(lab: Lab) -> None:
    lab.open_notebook(
        "memory.ipynb",
        [SETUP, "%agent memory add prefers seaborn for plots --user", "%agent memory"],
    )
    lab.run_cell(0)
    lab.run_cell(1)
    lab.run_cell(2)
    table = lab.output(2).locator(".mibyan-table table")
    table.wait_for(state="visible")
    rows = [text(row) for row in table.locator("tbody tr").all()]
    assert any("prefers seaborn for plots" in row for row in rows), rows
    lab.screenshot("memory-table")


def test_a_second_notebook_forks_the_session_an_idle_kernel_holds(lab: Lab) -> None:
    lab.open_notebook("first.ipynb", [SETUP, "%%agent --tools none\nSay hello."])
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"
    with SessionStore(lab.db_path) as store:
        (held,) = store.list()

    lab.open_in_app("second.ipynb", [SETUP, "%%agent --tools none --session last\nAgain."])
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_while_running(
        1, "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-ask')", "ask card"
    )
    view = lab.view(1)
    card = view.locator(".mibyan-ask")
    assert "is open in another kernel" in text(card.locator(".mibyan-ask-question"))
    labels = [text(b) for b in card.locator("button.mibyan-ask-choice").all()]
    assert labels == ["Fork and continue here", "Take it over", "Cancel"], labels
    assert text(view.locator(".mibyan-session-id")) == held.id[:8]
    lab.screenshot("lease-ask-card")

    card.locator("button.mibyan-ask-choice[data-value='fork']").click()
    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    with SessionStore(lab.db_path) as store:
        infos = store.list()
    (fork,) = [info for info in infos if info.id != held.id]
    assert fork.parent_id == held.id
    footer = text(transcript.locator(".mibyan-footer"))
    assert f"session {fork.id[:12]}" in footer, footer
    assert held.id[:12] not in footer


def test_a_spilled_result_shows_its_preview_and_expand_loads_the_whole(
    lab: Lab, server: FakeProviderServer
) -> None:
    head, middle, tail = "HEAD-MARK ", "MIDDLE-MARK ", "TAIL-MARK"
    whole = head + "a" * 14_000 + middle + "b" * 14_000 + tail
    server.push(
        FakeReply(
            "reading", calls=[FakeCall("read_file", {"path": "big.txt", "max_chars": 40_000})]
        ),
        FakeReply(calls=[FakeCall("run_python", {"code": "print(1)"})]),
        FakeReply("done"),
    )
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        "spill.ipynb", [SETUP, f"%%agent --model {model} --tools files,python\nRead big.txt."]
    )
    (lab.folder_path / "big.txt").write_text(whole, encoding="utf-8")
    lab.run_cell(0)
    lab.start_cell(1)
    hold_on_approval(lab, 1)

    result = lab.view(1).locator(".mibyan-tool-result").first
    result.locator("summary").click()
    shown = result.locator("pre")
    preview = shown.inner_text()
    assert head in preview, preview[:300]
    assert middle not in preview, "the preview is the head and the tail, not the whole"
    load = result.locator("button.mibyan-expand")
    assert f"({len(whole)} characters)" in text(load), text(load)
    lab.screenshot("spilled-preview")
    for _ in range(20):  # each click loads one chunk
        if load.count() == 0:
            break
        # Hold the button before the click: the last chunk removes it, and a locator
        # resolved after that would wait for a button that is never coming back.
        button = load.element_handle()
        button.click()
        lab.page.wait_for_function(
            "(b) => !b.isConnected || !b.disabled", arg=button, timeout=10_000
        )
    assert load.count() == 0, "the whole result was loaded, nothing left to load"
    assert shown.inner_text().strip() == whole
    lab.screenshot("spilled-expanded")
    assert middle not in str(server.requests[1].body), "the model got the preview only"
    deny_and_finish(lab, 1)
