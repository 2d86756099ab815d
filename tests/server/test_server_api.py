"""The sessions API through a real jupyter server: every route's shape, bad and unknown
ids, leases, search, export downloads and paging (who may call: test_server_auth.py)."""

from __future__ import annotations

import json

import httpx
import nbformat
import pytest

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.server.shapes import (
    ForkJSON,
    MessageJSON,
    MessagesJSON,
    RenameJSON,
    SearchJSON,
    SessionJSON,
    SessionListJSON,
    TranscriptJSON,
)
from mibyan_jupyter.store import LeaseKeeper, SessionStore
from mibyan_jupyter.store.records import append_message, insert_session, set_status

from .conftest import SECRET, add_cost, add_session, error, shaped

pytestmark = pytest.mark.slow
UNKNOWN = "0123456789abcdef0123456789abcdef"
BAD_IDS = ("zz", "ABCDEF12", "abc", "abcdef-12", "0123456789abcdef0123456789abcdef0")


# -- reading -------------------------------------------------------------------------------


def test_the_listing_pages_newest_first(api: httpx.Client, store: SessionStore) -> None:
    for index in range(7):
        add_session(store, f"listed {index}")
    first = shaped(SessionListJSON, api.get("/sessions").json())
    total = first["total"]
    assert total == len(store.list(limit=None)) >= 7
    pages: list[SessionJSON] = []
    for offset in range(0, total + 3, 3):
        page = shaped(SessionListJSON, api.get(f"/sessions?limit=3&offset={offset}").json())
        assert page["total"] == total
        assert len(page["sessions"]) <= 3
        pages += page["sessions"]
    assert [s["id"] for s in pages] == [info.id for info in store.list(limit=None)]
    assert [s["updated_at"] for s in pages] == sorted(
        (s["updated_at"] for s in pages), reverse=True
    )
    for query in ("limit=0", "limit=501", "limit=ten", "offset=-1", "offset=1.5"):
        error(api.get(f"/sessions?{query}"), 400, "bad_request")


def test_a_session_says_its_lineage_cost_and_lease(api: httpx.Client, store: SessionStore) -> None:
    root = add_session(store, "root", notebook_path="work/analysis.ipynb")
    add_cost(store.db.path, root, 0.25)
    fork = store.fork(root, at=2).id
    with_fork = insert_session(store.db, parent_id=fork, link_kind="compression", fork_at=1)
    one = shaped(SessionJSON, api.get(f"/sessions/{root}").json())
    assert one["id"] == root
    assert one["title"] == "root"
    assert one["model"] == "demo:scripted"
    assert one["notebook"] == "work/analysis.ipynb"
    assert one["status"] == "idle"
    assert one["messages"] == 4
    assert one["cost"] == pytest.approx(0.25)
    assert one["root_id"] == root
    assert one["parent_id"] is None
    assert one["link_kind"] is None
    assert one["leased"] is False
    forked = shaped(SessionJSON, api.get(f"/sessions/{fork}").json())
    assert forked["link_kind"] == "fork"
    assert forked["parent_id"] == root
    assert forked["messages"] == 2
    assert forked["cost"] is None
    compacted = shaped(SessionJSON, api.get(f"/sessions/{with_fork}").json())
    assert compacted["link_kind"] == "compression"
    assert compacted["root_id"] == root
    assert shaped(SessionJSON, api.get(f"/sessions/{root[:8]}").json())["id"] == root


def test_bad_ids_are_400_and_unknown_ids_404(api: httpx.Client) -> None:
    for session in (*BAD_IDS, UNKNOWN):
        expected = (404, "not_found") if session == UNKNOWN else (400, "bad_request")
        for method, path, body in (
            ("GET", f"/sessions/{session}", None),
            ("GET", f"/sessions/{session}/messages", None),
            ("GET", f"/sessions/{session}/transcript", None),
            ("GET", f"/sessions/{session}/export", None),
            ("POST", f"/sessions/{session}/fork", {"at": None}),
            ("PATCH", f"/sessions/{session}", {"title": "x"}),
            ("DELETE", f"/sessions/{session}", None),
        ):
            error(api.request(method, path, json=body), *expected)
    assert api.get("/sessions/../../api/status").status_code in (400, 403, 404)


def test_search_returns_verbatim_snippets_and_offsets(
    api: httpx.Client, store: SessionStore
) -> None:
    text = 'Compare sales["year"][0] with <script>alert(1)</script> and <b>bold</b> zebrafish'
    session = add_session(store, "search me", [UserMessage(content=text)])
    found = shaped(SearchJSON, api.get("/sessions", params={"q": 'sales["year"] <script>'}).json())
    assert [s["id"] for s in found["sessions"]] == [session]
    (hit,) = found["hits"]
    assert hit["session_id"] == session
    assert hit["seq"] == 0
    assert hit["role"] == "user"
    assert hit["snippet"] == text
    marked = [hit["snippet"][start:end] for start, end in hit["highlights"]]
    assert marked == ['sales["year', "script", "script"]  # a phrase is one span
    for query in ("[", "]]", "[]", "<>", '"'):
        assert shaped(SearchJSON, api.get("/sessions", params={"q": query}).json())["hits"] == []
    two = add_session(store, "another", [UserMessage(content="zebrafish again")])
    found = shaped(SearchJSON, api.get("/sessions", params={"q": "zebrafish", "limit": 1}).json())
    assert len(found["hits"]) == 1
    assert found["sessions"][0]["id"] in (session, two)
    error(api.get("/sessions", params={"q": "zebrafish", "limit": 0}), 400, "bad_request")


def test_messages_come_in_pages_redacted(api: httpx.Client, store: SessionStore) -> None:
    session = add_session(store, "paged")
    store_secret = UserMessage(content=f"my key is {SECRET}, keep it")
    append_message(store.db, session, store_secret)
    seen: list[MessageJSON] = []
    offset: int | None = 0
    while offset is not None:
        page = shaped(
            MessagesJSON, api.get(f"/sessions/{session}/messages?limit=2&offset={offset}").json()
        )
        assert page["total"] == 5
        seen += page["messages"]
        offset = page["next"]
    assert [m["seq"] for m in seen] == [0, 1, 2, 3, 4]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user"]
    assert seen[1]["tool_calls"] == [
        {"id": "call-1", "name": "run_python", "arguments": '{"code": "1"}'}
    ]
    assert seen[2]["name"] == "run_python"
    assert seen[0]["name"] is None
    assert SECRET not in json.dumps(seen)
    assert "keep it" in seen[4]["text"]
    past = shaped(MessagesJSON, api.get(f"/sessions/{session}/messages?offset=9").json())
    assert past == {"messages": [], "total": 5, "next": None}
    error(api.get(f"/sessions/{session}/messages?limit=501"), 400, "bad_request")


def test_the_transcript_is_sanitized_html(api: httpx.Client, store: SessionStore) -> None:
    hostile = (
        'Hi <script>alert("x")</script><img src=x onerror="alert(1)"> [a](javascript:alert(1))'
    )
    session = add_session(store, "hostile", [UserMessage(content=hostile)])
    html = shaped(TranscriptJSON, api.get(f"/sessions/{session}/transcript").json())["html"]
    assert "mibyan-transcript" in html
    assert "Hi" in html
    lowered = html.lower()
    assert "<script" not in lowered
    assert "onerror" not in lowered
    assert "javascript:" not in lowered


# -- exports -------------------------------------------------------------------------------


def test_export_is_a_download_that_says_what_it_holds(
    api: httpx.Client, store: SessionStore
) -> None:
    session = add_session(store, 'Sales "Q3" / résumé')
    reply = api.get(f"/sessions/{session}/export?format=ipynb")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/x-ipynb+json")
    disposition = reply.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="Sales Q3 resume.ipynb"'), disposition
    assert "filename*=UTF-8''Sales%20Q3%20r%C3%A9sum%C3%A9.ipynb" in disposition
    assert reply.headers["x-mibyan-includes"] == "4 messages"
    nbformat.validate(nbformat.reads(reply.text, as_version=4))
    markdown = api.get(f"/sessions/{session}/export?format=md")
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert 'filename="Sales Q3 resume.md"' in markdown.headers["content-disposition"]
    assert "the answer is **1**" in markdown.text
    error(api.get(f"/sessions/{session}/export?format=pdf"), 400, "bad_request")
    untitled = add_session(store, "", [])
    plain = api.get(f"/sessions/{untitled}/export").headers
    assert f'filename="session-{untitled[:8]}.ipynb"' in plain["content-disposition"]
    assert plain["x-mibyan-includes"] == "0 messages"


def test_export_and_fork_of_a_running_session_say_so(
    api: httpx.Client, store: SessionStore
) -> None:
    session = add_session(store, "running")
    set_status(store.db, session, "running")  # owned by this (live) process
    shown = shaped(SessionJSON, api.get(f"/sessions/{session}").json())
    assert shown["status"] == "running"
    assert shown["leased"] is True
    includes = api.get(f"/sessions/{session}/export").headers["x-mibyan-includes"]
    assert includes == "4 messages; a run in progress is included up to its last finished message"
    fork = shaped(ForkJSON, api.post(f"/sessions/{session}/fork", json={"at": None}).json())
    assert "run in progress" in fork["includes"]
    error(api.delete(f"/sessions/{session}"), 409, "leased")
    set_status(store.db, session, "idle")


def test_an_export_carries_the_history_across_compactions(
    api: httpx.Client, store: SessionStore
) -> None:
    parent = add_session(store, "long")
    child = insert_session(store.db, parent_id=parent, link_kind="compression", fork_at=0)
    append_message(store.db, child, UserMessage(content="after the compaction"))
    reply = api.get(f"/sessions/{child}/export?format=md")
    assert "after the compaction" in reply.text
    assert "Let me run it." in reply.text
    assert reply.headers["x-mibyan-includes"] == (
        "5 messages across 1 compaction (the messages, not the summaries)"
    )
    page = shaped(MessagesJSON, api.get(f"/sessions/{child}/messages").json())
    assert page["total"] == 5
    assert page["messages"][-1]["text"] == "after the compaction"


# -- changing ------------------------------------------------------------------------------


def test_fork_copies_the_first_messages(api: httpx.Client, store: SessionStore) -> None:
    session = add_session(store, "to fork")
    reply = api.post(f"/sessions/{session}/fork", json={"at": 2})
    assert reply.status_code == 201
    fork = shaped(ForkJSON, reply.json())
    assert fork["session"]["parent_id"] == session
    assert fork["session"]["messages"] == 2
    assert fork["session"]["link_kind"] == "fork"
    assert fork["session"]["root_id"] == session
    assert fork["includes"] == "The first 2 of 4 messages"
    whole = shaped(ForkJSON, api.post(f"/sessions/{session}/fork", json={}).json())
    assert whole["includes"] == "All 4 messages"
    assert whole["session"]["messages"] == 4
    for body in ({"at": 5}, {"at": -1}, {"at": "2"}, {"at": True}, {"at": 1.5}, [1]):
        error(api.post(f"/sessions/{session}/fork", json=body), 400, "bad_request")
    bad_json = api.post(f"/sessions/{session}/fork", content=b"{not json")
    error(bad_json, 400, "bad_request")
    assert len(store.children(session)) == 2


def test_rename_takes_one_line_of_1_to_200_characters(
    api: httpx.Client, store: SessionStore
) -> None:
    session = add_session(store, "old")
    renamed = shaped(
        RenameJSON, api.patch(f"/sessions/{session}", json={"title": "  New  "}).json()
    )
    assert renamed["session"]["title"] == "New"
    for body in (
        {"title": ""},
        {"title": "   "},
        {"title": "x" * 201},
        {"title": "a\nb"},
        {"title": 3},
        {},
    ):
        error(api.patch(f"/sessions/{session}", json=body), 400, "bad_request")
    assert api.patch(f"/sessions/{session}", json={"title": "y" * 200}).status_code == 200
    assert store.get(session).title == "y" * 200


def test_delete_refuses_a_leased_session(api: httpx.Client, store: SessionStore) -> None:
    session = add_session(store, "held")
    keeper = LeaseKeeper(store.db.path)
    try:
        keeper.acquire(session)
        assert shaped(SessionJSON, api.get(f"/sessions/{session}").json())["leased"] is True
        message = error(api.delete(f"/sessions/{session}"), 409, "leased")
        assert f"kernel pid {keeper.owner.pid}" in message
        assert store.get(session).id == session
        keeper.release(session)
    finally:
        keeper.close()
    assert shaped(SessionJSON, api.get(f"/sessions/{session}").json())["leased"] is False
    reply = api.delete(f"/sessions/{session}")
    assert reply.status_code == 204
    assert reply.content == b""
    error(api.get(f"/sessions/{session}"), 404, "not_found")
