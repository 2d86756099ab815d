"""The view's receipts for a session that lasts: a compaction says what it summarised and
kept with the summary collapsed under it; the notes sent with a request are notices, never
a "You" message (docs/architecture.md, "Context compression")."""

from __future__ import annotations

import pytest
from view_support import Recorder, record_comms

from mibyan_jupyter.core.notices import CompactionNotice, NoteNotice
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

HEADER = ViewHeader("t", "s1", "demo", demo=True, context_window=8192)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def test_a_compaction_is_a_receipt_with_the_summary_expandable(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(
        CompactionNotice(
            messages_before=44,
            messages_after=22,
            tokens_before=6000,
            tokens_after=2100,
            summary="Goals: plot sales.\nDo not: touch raw/.",
            reason="aggressive",
            summarised=23,
            kept_head=1,
            kept_tail=20,
        )
    )
    (notice,) = recorder.ops("notice")
    assert notice["kind"] == "compaction"
    assert notice["text"] == (
        "Compacted the conversation (the conversation was close to the context window):"
        " 23 messages summarised, 44 → 22 messages, 6,000 → 2,100 tokens;"
        " kept the first 1 message and the last 20 messages"
    )
    assert notice["detail"] == "Goals: plot sales.\nDo not: touch raw/."


def test_a_compaction_without_a_summary_has_no_expand(recorder: Recorder) -> None:
    AgentView(HEADER)(CompactionNotice(messages_before=30, messages_after=10, reason="manual"))
    (notice,) = recorder.ops("notice")
    assert "detail" not in notice
    assert "(%agent compact): 20 messages summarised" in notice["text"]


def test_notes_are_notices_never_a_you_message(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(NoteNotice(notes=("The user's variables now:\n- df: DataFrame (3, 2)", "70% of turns")))
    view(NoteNotice(notes=("  ",)))  # nothing sent: nothing shown
    (notice,) = recorder.ops("notice")
    assert notice["kind"] == "notes"
    assert notice["text"] == "Sent with the request: The user's variables now:; 70% of turns"
    assert "df: DataFrame (3, 2)" in notice["detail"]
    assert recorder.ops("user") == []
