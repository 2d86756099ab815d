"""Full-text search on both backends: ranking (bm25 on SQLite, ts_rank on PostgreSQL),
snippets, safe queries, catching up, deletes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_backend import Backend

from mibyan_jupyter.core import AssistantMessage, FunctionCall, ToolCall, ToolMessage, UserMessage
from mibyan_jupyter.store.records import append_message
from mibyan_jupyter.store.search import ELLIPSIS, fts_query, search
from mibyan_jupyter.store.sessions import SessionStore

FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


def test_ranking_snippets_and_hit_fields(store: SessionStore) -> None:
    once = store.create("once").id
    thrice = store.create("thrice").id
    append_message(store.db, once, UserMessage(content=f"dataframe {FILLER} one two three"))
    append_message(store.db, thrice, UserMessage(content=f"dataframe {FILLER} dataframe dataframe"))
    hits = search(store, "dataframe")
    assert [h.session_id for h in hits] == [thrice, once]
    assert hits[0].score > hits[1].score
    top = hits[0]
    assert (top.title, top.seq, top.role) == ("thrice", 0, "user")
    assert "dataframe" in top.snippet
    assert "[" not in top.snippet
    marked = [text for text, matched in top.parts() if matched]
    assert marked
    assert set(marked) == {"dataframe"}
    assert "".join(text for text, _ in top.parts()) == top.snippet
    assert ELLIPSIS in hits[1].snippet  # the long message is cut around the match


def test_empty_and_hostile_queries_never_raise(store: SessionStore) -> None:
    sid = store.create().id
    append_message(store.db, sid, UserMessage(content='use foo-bar AND "quotes" NEAR col:x ^a'))
    assert search(store, "") == []
    assert search(store, "   ") == []
    assert search(store, "*") == []
    assert search(store, "foo", limit=0) == []
    hostile = [
        '"',
        '"""',
        "foo-bar",
        "AND",
        "OR NOT",
        "NEAR(a b)",
        "col:x",
        "^a",
        "*foo",
        "(",
        ")",
        "a'b",
        "\\",
        "-",
        "{x}",
        "a:b:c",
        "+",
        "\x00",
        '"unbalanced',
        "ünïcödé",
        "🙂",
        "'&|!():*<>",  # tsquery's operators
        "a&b|c !d",
        "x <-> y",
        "foo:*",
        "'pand'*",
        "foo-ba*",
        "²*",  # a digit to Python, no lexeme to PostgreSQL
        "\\'",
        "\ud800 lone",  # a lone surrogate
        "a\udfffb*",  # one inside a word
        "ab\x00cd",  # NUL inside a word
    ]
    for text in hostile:
        search(store, text)  # never raises
    assert len(search(store, "foo-bar")) == 1  # a phrase: foo followed by bar
    assert len(search(store, "AND")) == 1  # a word, not an operator
    assert len(search(store, "col:x")) == 1
    assert search(store, "bar-foo") == []
    assert search(store, "foo ²") == []  # every word must match, even one with no lexeme


def test_query_building() -> None:
    assert fts_query("foo bar") == '"foo" "bar"'
    assert fts_query('say "hello world" twice') == '"say" "hello world" "twice"'
    assert fts_query('a"b') == '"a""b"'
    assert fts_query("pand*") == '"pand"*'
    assert fts_query("- * !!") is None


def test_prefix_phrase_and_all_words(store: SessionStore) -> None:
    sid = store.create().id
    append_message(store.db, sid, UserMessage(content="import pandas as pd"))
    append_message(store.db, sid, AssistantMessage(content="pandas loaded, now numpy"))
    assert search(store, "pand") == []
    assert {h.seq for h in search(store, "pand*")} == {0, 1}
    assert [h.seq for h in search(store, "pandas numpy")] == [1]  # every word must match
    assert [h.seq for h in search(store, '"as pd"')] == [0]
    assert search(store, '"pd as"') == []
    assert [h.seq for h in search(store, "PANDAS Numpy")] == [1]  # case-folded
    if not store.db.dialect.is_postgres:  # PostgreSQL's 'simple' configuration keeps accents
        assert [h.seq for h in search(store, "loadéd")] == [1]  # diacritics folded


def test_tool_calls_and_results_are_searchable(store: SessionStore) -> None:
    sid = store.create().id
    call = ToolCall(id="c1", function=FunctionCall(name="run_python", arguments='{"code": "x"}'))
    append_message(store.db, sid, UserMessage(content="go"))
    append_message(store.db, sid, AssistantMessage(tool_calls=(call,), stop_reason="tool_use"))
    append_message(store.db, sid, ToolMessage(tool_call_id="c1", content="Traceback: KeyError"))
    assert [(h.seq, h.role) for h in search(store, "run_python")] == [(1, "assistant")]
    assert [(h.seq, h.role) for h in search(store, "keyerror")] == [(2, "tool")]


def test_session_filter_limit_and_catching_up(store: SessionStore) -> None:
    a = store.create("a").id
    b = store.create("b").id
    for index in range(5):
        append_message(store.db, a, UserMessage(content=f"needle {index}"))
        append_message(store.db, b, UserMessage(content=f"needle {index}"))
    assert len(search(store, "needle")) == 10
    assert len(search(store, "needle", limit=3)) == 3
    assert {h.session_id for h in search(store, "needle", session_id=b)} == {b}
    assert len(search(store, "needle", session_id=b, limit=2)) == 2
    append_message(store.db, a, UserMessage(content="needle late"))  # after the last search
    assert len(search(store.db, "late")) == 1  # a Database works too


def test_deleted_and_forked_sessions(store: SessionStore) -> None:
    a = store.create().id
    append_message(store.db, a, UserMessage(content="unique walrus"))
    assert len(search(store, "walrus")) == 1
    fork = store.fork(a).id
    assert {h.session_id for h in search(store, "walrus")} == {a, fork}
    store.delete(a)
    assert [h.session_id for h in search(store, "walrus")] == [fork]
    store.delete(fork)
    assert search(store, "walrus") == []


HOSTILE = (
    'sales["year"] = sales["year"].astype(int)  # [note] <b>bold</b> &amp;'
    " \ue000marked\ue001 \ue002 ]["
)


def test_snippets_are_verbatim_and_highlights_are_offsets(store: SessionStore) -> None:
    """Content holding the old marks (``[``/``]``), the new ones (private-use characters),
    HTML and entities comes back exactly as written, with only the matches highlighted."""
    sid = store.create().id
    append_message(store.db, sid, UserMessage(content=HOSTILE))
    for word, expected in (("sales", ["sales", "sales"]), ("year", ["year", "year"])):
        (hit,) = search(store, word)
        assert hit.snippet == HOSTILE
        assert [text for text, matched in hit.parts() if matched] == expected
        assert "".join(text for text, _ in hit.parts()) == HOSTILE
        for start, end in hit.highlights:
            assert hit.snippet[start:end] == word
    (hit,) = search(store, "bold", session_id=sid)  # the one-session query takes the same path
    assert hit.snippet == HOSTILE
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["bold"]


def test_a_message_holding_every_usual_mark_gets_others(store: SessionStore) -> None:
    sid = store.create().id
    crowded = "".join(chr(c) for c in range(0xE000, 0xE100)) + " needle in code[0]"
    append_message(store.db, sid, UserMessage(content=crowded))
    (hit,) = search(store, "needle")
    assert hit.snippet.endswith(" needle in code[0]")
    assert "\ue0ff" in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["needle"]


def test_code_keeps_its_lines_and_indentation(store: SessionStore) -> None:
    sid = store.create().id
    code = "def total(sales):\n    return sales['amount'].sum()\n"
    append_message(store.db, sid, UserMessage(content=code))
    (hit,) = search(store, "amount")
    assert hit.snippet == code


def test_a_long_message_is_cut_around_its_match(store: SessionStore) -> None:
    sid = store.create().id
    # The needle within the first 100,000 characters: all the team store indexes (0001).
    long = "intro words " + "filler " * 10_000 + "the rare needle here " + "tail " * 30_000
    append_message(store.db, sid, UserMessage(content=long))
    (hit,) = search(store, "needle")
    assert hit.snippet.startswith(ELLIPSIS)
    assert hit.snippet.endswith(ELLIPSIS)
    assert len(hit.snippet) < 200
    assert hit.snippet.strip(ELLIPSIS) in long
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["needle"]
