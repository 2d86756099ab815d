"""The live view renders a reply's Markdown as it streams: each completed block goes out once,
right after its text, as a program over the text the front end received (redacted), so the
final op carries no HTML and nothing jumps at the end."""

from __future__ import annotations

import pytest
from markdown_support import run_program, shown_text
from view_support import FakeTime, Recorder, record_comms, reply_events, timed_view, update

from mibyan_jupyter.core.events import MessageEnd, MessageStart
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.notices import RetryNotice
from mibyan_jupyter.core.stream import TextDelta

REPLY = (
    "## Plan\n\nLoad the **sales** data with `pandas`, then plot it:\n\n"
    "```python\nimport pandas as pd\nsales = pd.read_csv('sales.csv')\n```\n\n"
    "| year | total |\n|---|---:|\n| 2024 | 10 |\n\n- one\n- two\n\nDone, see [docs](https://pandas.pydata.org)."
)
KEY = "sk-test-" + "M4r" * 10


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def stream(recorder: Recorder, text: str, size: int = 5, rate: float = 100) -> None:
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    for i, event in enumerate(reply_events(pieces)):
        fake.advance(i / rate)
        view(event)


def rendered(recorder: Recorder, ident: str = "a1") -> tuple[str, list[str]]:
    """The element's streamed text, and the HTML of each blocks op run over its part."""
    text = recorder.streamed("text", ident)
    at = 0
    pages = []
    for op in recorder.ops("blocks"):
        if op["id"] == ident:
            pages.append(run_program(op["blocks"], text[at : at + op["chars"]]))
            at += op["chars"]
    assert at == len(text)  # every character ends up in a block
    return text, pages


def test_blocks_render_as_the_reply_streams_and_the_end_adds_no_html(recorder: Recorder) -> None:
    stream(recorder, REPLY, rate=20)  # ~25 characters a flush: blocks complete one by one
    text, pages = rendered(recorder)
    assert text == REPLY
    assert len(pages) >= 5  # the heading, the paragraph, the code, the table...
    page = "".join(pages)
    assert "<h2>Plan</h2>" in page
    assert '<pre data-lang="python"><span class="k">import</span>' in page
    assert '<th align="right">total</th>' in page
    assert '<a href="https://pandas.pydata.org">docs</a>' in page
    assert recorder.ops("final")[0]["html"] == ""
    # Each blocks op rides in the batch of the text that completed it, right after it.
    kinds = recorder.kinds()
    first = kinds.index("blocks")
    assert kinds[first - 1] == "text"


def test_blocks_point_into_the_redacted_text(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIBYAN_MARKDOWN_VIEW_TEST_API_KEY", KEY)
    stream(recorder, f"Your key:\n\n```\n{KEY}\n```\n\nand **{KEY}** again.", size=3)
    _text, pages = rendered(recorder)
    assert KEY not in recorder.everything()
    assert KEY[:12] not in recorder.everything()
    page = "".join(pages)
    assert page.count("[redacted]") == 2
    assert "<strong>[redacted]</strong>" in page


def test_a_reply_sent_whole_gets_its_html_in_the_final_op(recorder: Recorder) -> None:
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    view(MessageStart(message=AssistantMessage()))
    view(MessageEnd(message=AssistantMessage(content="Whole:\n\n```python\nx = 1\n```")))
    assert recorder.ops("blocks") == []
    html = recorder.ops("final")[0]["html"]
    assert '<pre class="mibyan-code" data-lang="python"' in html
    assert '<span class="m" style="color:#008800">1</span>' in html


def test_a_retry_starts_the_rendering_over(recorder: Recorder) -> None:
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    events = list(reply_events(["First try.\n\n", "More ", "text"]))
    for event in events[:4]:
        view(event)
    view._outbox.flush()
    view(RetryNotice(attempt=2, max_attempts=3, delay=1, error_kind="overloaded", message="529"))
    for piece in ["Second ", "try.\n\n", "Done."]:
        view(update(TextDelta(delta=piece)))
    view(MessageEnd(message=AssistantMessage(content="Second try.\n\nDone.")))
    ops = recorder.ops()
    after = ops[next(i for i, op in enumerate(ops) if op["op"] == "clear") :]
    chars = [op["chars"] for op in after if op["op"] == "blocks"]
    assert sum(chars) == len("Second try.\n\nDone.")  # counted from the restart, not before
    texts = "".join(op["text"] for op in after if op["op"] == "text")
    assert (
        shown_text(next(op for op in after if op["op"] == "blocks")["blocks"], texts)
        == "Second try."
    )
