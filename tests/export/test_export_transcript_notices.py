"""The static transcript keeps a run's notices (issue 10, items 2 and 3): each compaction
receipt at its place in the conversation with the summary collapsed, each note as a notice
line and never as a "You" message, and a hostile summary stays inert (docs/architecture.md,
"Context compression")."""

from __future__ import annotations

import pytest
from transcript_support import CORPUS, KEY, assert_inert

from mibyan_jupyter.core.messages import AssistantMessage, Message, UserMessage
from mibyan_jupyter.core.notices import CompactionNotice, NoteNotice
from mibyan_jupyter.export.notices import Placed
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript

SESSION = SessionMeta(id="s-1234", title="Explore the data", model="demo")
RECEIPT = CompactionNotice(
    messages_before=44,
    messages_after=22,
    tokens_before=6000,
    tokens_after=2100,
    summary="Goals: plot **sales**.\nDo not: touch raw/.",
    reason="aggressive",
    summarised=23,
    kept_head=1,
    kept_tail=20,
)
LINE = (
    "Compacted the conversation (the conversation was close to the context window):"
    " 23 messages summarised, 44 → 22 messages, 6,000 → 2,100 tokens;"
    " kept the first 1 message and the last 20 messages"
)
NOTE = NoteNotice(notes=("[budget] 70 % of turns used (7 of 10)", "Variables:\n- my_df: DataFrame"))
MESSAGES: list[Message] = [
    UserMessage(content="first question"),
    AssistantMessage(content="first answer"),
    UserMessage(content="second question"),
    AssistantMessage(content="second answer"),
]


def render(*placed: Placed) -> dict[str, str]:
    return render_transcript(MESSAGES, session=SESSION, status="completed", notices=placed)


def test_a_receipt_and_a_note_sit_at_their_place_in_every_layout() -> None:
    bundle = render(Placed(2, RECEIPT), Placed(3, NOTE))
    page = bundle["text/html"]
    assert page.startswith('<div class="mibyan-transcript"')
    order = ["first answer", 'data-kind="compaction"', "second question", 'data-kind="notes"']
    positions = [page.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert page.index('data-kind="notes"') < page.index("second answer")
    assert LINE in page
    assert '<details class="mibyan-summary"><summary>Summary</summary>' in page
    assert "<details open" not in page  # collapsed
    assert "<strong>sales</strong>" in page  # the summary is Markdown, rendered
    assert "Sent with the request: [budget] 70 % of turns used (7 of 10); Variables:" in page
    assert page.count('class="mibyan-user"') == 2  # a note is never a "You" message

    markdown = bundle["text/markdown"]
    assert markdown.index("first answer") < markdown.index("Compacted the conversation")
    assert markdown.index("Compacted the conversation") < markdown.index("second question")
    assert "<details><summary>Summary</summary>" in markdown
    assert "Goals: plot **sales**." in markdown
    assert "my_df: DataFrame" in markdown
    assert markdown.count("**You**") == 2

    plain = bundle["text/plain"]
    assert f"Notice: {LINE}\nSummary:\nGoals: plot **sales**." in plain
    assert plain.index("second question") < plain.index("Notice: Sent with the request")
    assert plain.index("Notice: Sent with the request") < plain.index("second answer")
    assert plain.count("You:") == 2


def test_notices_at_the_start_at_the_end_and_without_text() -> None:
    bare = CompactionNotice(messages_before=30, messages_after=10, reason="manual")
    bundle = render(Placed(0, NOTE), Placed(99, bare), Placed(1, NoteNotice(notes=("  ",))))
    page = bundle["text/html"]
    assert page.index('data-kind="notes"') < page.index("first question")
    assert page.index("(%agent compact): 20 messages summarised") > page.index("second answer")
    assert page.count('class="mibyan-notice"') == 2  # blank notes show nothing
    assert "mibyan-summary" not in page  # no summary, no expand
    assert render() == render_transcript(MESSAGES, session=SESSION, status="completed")


def test_a_hostile_summary_stays_inert_and_secrets_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIBYAN_NOTICE_TEST_API_KEY", KEY)
    hostile = RECEIPT.model_copy(update={"summary": f"{CORPUS}\n\n{KEY}"})
    note = NoteNotice(notes=(f"<img src=x onerror=alert(1)> {KEY}",))
    bundle = render(Placed(1, hostile), Placed(2, note))
    page = bundle["text/html"]
    assert_inert(page)
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the note shows as the text it is
    for layout in bundle.values():
        assert KEY not in layout
    assert "<script" not in bundle["text/markdown"].lower()
