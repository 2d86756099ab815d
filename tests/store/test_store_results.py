"""Big tool results kept in full in the session database (migration 0003), paged by id
through the session's lineage; pins recorded in the session's config. On both backends
(tests/store_backend.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_backend import Backend

from mibyan_jupyter.core.events import MessageEnd
from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.core.notices import CompactionNotice
from mibyan_jupyter.core.results import ResultStore
from mibyan_jupyter.store.results import SessionResults, full_text
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.store.writer import StoreWriter

BIG = "".join(f"line {i} é😀\n" for i in range(5_000))


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


def test_keep_and_page_by_characters(store: SessionStore, backend: Backend) -> None:
    info = store.create("big")
    results: ResultStore = SessionResults(store.db, info.id)
    rid = results.keep("c1", "read_file", BIG)
    assert results.page(rid, 0, 7) == BIG[:7]
    assert results.page(rid, 9, 40) == BIG[9:49]  # characters, not bytes (emoji inside)
    assert results.page(rid, len(BIG) + 5, 10) == ""
    assert results.page("res_unknown", 0, 10) is None
    # Another process (a new connection) reads it from the database.
    with backend.store() as again:
        assert SessionResults(again.db, info.id).page(rid, 0, len(BIG)) == BIG
        row = again.db.conn.execute(
            "SELECT call_id, tool_name, chars FROM tool_results WHERE result_id = ?", (rid,)
        ).fetchone()
        assert tuple(row) == ("c1", "read_file", len(BIG))


def test_a_result_of_another_session_is_not_found(store: SessionStore) -> None:
    one, two = store.create("one"), store.create("two")
    rid = SessionResults(store.db, one.id).keep("c1", "t", "x" * 10)
    assert SessionResults(store.db, two.id).page(rid, 0, 5) is None
    assert full_text(store.db, two.id, rid) is None


def test_secrets_are_redacted_before_they_are_stored(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuvwxyz012345")
    info = store.create("secret")
    rid = SessionResults(store.db, info.id).keep(
        "c1", "env", "key=sk-test-abcdefghijklmnopqrstuvwxyz012345"
    )
    stored = full_text(store.db, info.id, rid)
    assert stored is not None
    assert "sk-test-abcdefghijklmnopqrstuvwxyz012345" not in stored


async def test_results_follow_the_writer_and_the_lineage(store: SessionStore) -> None:
    parent = store.create("spill")
    writer = StoreWriter(store.db, parent.id)
    results = SessionResults(store.db, parent.id, writer=writer)
    first = UserMessage(content="go", timestamp=1.0)
    await writer(MessageEnd(message=first))
    before = results.keep("c1", "read", BIG)
    assert results.page(before, 0, 4) == "line"  # readable before the row lands
    kept = (first, UserMessage(content="[Summary]", timestamp=2.0))
    await writer(CompactionNotice(messages_before=2, messages_after=2, messages=kept))
    after = results.keep("c2", "read", "y" * 20_000)
    assert writer.drain(5)
    child = writer.session_id
    assert results.session_id == child
    owners = dict(store.db.conn.execute("SELECT result_id, session_id FROM tool_results"))
    assert owners == {before: parent.id, after: child}
    fresh = SessionResults(store.db, child)  # a resumed kernel: only the child's id
    assert fresh.page(before, 0, len(BIG)) == BIG  # kept before the compaction
    assert fresh.page(after, 19_990, 100) == "y" * 10
    assert SessionResults(store.db, parent.id).page(after, 0, 1) is None  # not upward


def test_pins_are_recorded_in_the_config(store: SessionStore) -> None:
    info = store.create("pins", config={"tools": "kernel"})
    assert info.settings.pins is None
    updated = store.set_pins(info.id, ["Use polars", "  ", "Plots in French\ud800"])
    assert updated.settings.pins == ("Use polars", "Plots in French\ufffd")
    assert updated.settings.tools == "kernel"  # the rest of the config is kept
    assert store.set_pins(info.id, []).settings.pins == ()
    with store.db.transaction() as conn:
        conn.execute("UPDATE sessions SET config = ? WHERE id = ?", ('{"pins": [1, 2]}', info.id))
    assert store.get(info.id).settings.pins is None  # a hand-edited wrong type: unrecorded
