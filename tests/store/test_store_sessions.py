"""SessionStore: round trips, lookup by prefix, list, rename, delete, fork, lineage, status,
"always" rules and secrets, on real SQLite files."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_backend import Backend

from mibyan_jupyter.core import (
    ApprovalPolicy,
    AssistantMessage,
    FunctionCall,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    Thinking,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.messages import ImageUrl
from mibyan_jupyter.secrets import is_secret_name, scrub_config
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.records import append_message, insert_session, load_messages, set_status
from mibyan_jupyter.store.search import search
from mibyan_jupyter.store.sessions import AmbiguousSessionError, SessionNotFoundError, SessionStore


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


def call(call_id: str, name: str = "run_python", arguments: str = '{"code": "1+1"}') -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def every_kind() -> list[Message]:
    """One message of every kind and shape the core produces."""
    image = ImagePart(image_url=ImageUrl(url="data:image/png;base64,iVBORw0KGgo=", detail="low"))
    return [
        SystemMessage(content="You are terse."),
        UserMessage(content="plot the data\nplease"),
        AssistantMessage(
            content="Plotting.",
            thinking=(
                Thinking(text="the user wants a plot", signature="sig-abc=="),
                Thinking(encrypted="enc-blob", redacted=True),
            ),
            tool_calls=(call("c1"), call("c2", "read_file", '{"path": "a.csv"}')),
            stop_reason="tool_use",
            usage=Usage(input=120, output=30, cache_read=100, reasoning=5, total=150, cost=None),
            model="anthropic:claude-x",
            api="anthropic_messages",
        ),
        ToolMessage(
            tool_call_id="c1",
            name="run_python",
            content=(TextPart(text="<Figure>"), image),
            details={"stdout": "", "execution_count": 3, "nested": {"a": [1, 2.5, None]}},
        ),
        ToolMessage(tool_call_id="c2", name="read_file", content="no such file", is_error=True),
        AssistantMessage(
            content="Done.",
            usage=Usage(input=200, output=10, total=210, cost=0.00123),
            model="openai:gpt-x",
        ),
        UserMessage(content=(TextPart(text="and this one?"), image)),
        AssistantMessage(
            content="Hal", stop_reason="aborted", error_message="the run was interrupted"
        ),
        AssistantMessage(
            stop_reason="error", error_message="HTTP 429", error_kind="rate_limit", model="m"
        ),
    ]


# -- round trip -------------------------------------------------------------------------------


def test_every_message_kind_round_trips(store: SessionStore, backend: Backend) -> None:
    info = store.create(model="m")
    originals = every_kind()
    for message in originals:
        append_message(store.db, info.id, message)
    assert load_messages(store.db, info.id) == originals
    reopened = SessionStore(backend.target)
    try:
        assert load_messages(reopened.db, info.id) == originals
        assert reopened.get(info.id).message_count == len(originals)
    finally:
        reopened.close()


def test_create_and_get(store: SessionStore) -> None:
    info = store.create(
        model="demo", api_mode="chat_completions", notebook_path="a.ipynb", config={"t": 0.5}
    )
    assert info.status == "idle"
    assert (info.title, info.message_count, info.cost) == ("", 0, None)
    assert info.config == {"t": 0.5}
    append_message(store.db, info.id, UserMessage(content="What is 2+2?\nsecond line"))
    got = store.get(info.id)
    assert got.title == "What is 2+2?"
    assert got.message_count == 1
    assert (got.model, got.api_mode, got.notebook_path) == ("demo", "chat_completions", "a.ipynb")


# -- ids and prefixes -------------------------------------------------------------------------


def test_id_prefixes(store: SessionStore) -> None:
    a = insert_session(store.db, session_id="abcdef111111", title="one")
    insert_session(store.db, session_id="abcdef222222", title="two")
    assert store.get("abcdef1").id == a
    assert store.get(a).id == a
    with pytest.raises(AmbiguousSessionError) as ambiguous:
        store.get("abcdef")
    assert "abcdef111111 (one)" in str(ambiguous.value)
    assert "abcdef222222 (two)" in str(ambiguous.value)
    with pytest.raises(SessionNotFoundError, match="6\\+ characters"):
        store.get("abcde")  # too short to be a prefix
    with pytest.raises(SessionNotFoundError, match="no session 'ffffff'"):
        store.get("ffffff")
    with pytest.raises(SessionNotFoundError):
        store.get("abcd%_")  # LIKE wildcards are not wildcards here


# -- list, last, rename -----------------------------------------------------------------------


def _add_usage(db: Database, session_id: str, cost: float | None) -> None:
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, model, cost, created_at) VALUES (?, 'm', ?, ?)",
            (session_id, cost, time.time()),
        )


def _touch(db: Database, session_id: str, created: float, updated: float) -> None:
    with db.transaction() as conn:
        conn.execute(
            "UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = ?",
            (created, updated, session_id),
        )


def test_list_filters_sort_counts_and_cost(store: SessionStore) -> None:
    a = store.create("banana", model="m1", notebook_path="x.ipynb").id
    b = store.create("apple", model="m2", notebook_path="x.ipynb").id
    c = store.create("cherry", model="m1", notebook_path="y.ipynb").id
    _touch(store.db, a, 100, 500)
    _touch(store.db, b, 200, 300)
    _touch(store.db, c, 300, 400)
    for _ in range(3):
        append_message(store.db, b, SystemMessage(content="s"))
    _touch(store.db, b, 200, 300)
    _add_usage(store.db, a, None)
    _add_usage(store.db, a, None)
    _add_usage(store.db, b, 0.25)
    _add_usage(store.db, b, None)
    _add_usage(store.db, b, 0.5)

    def ids(**kwargs: object) -> list[str]:
        return [s.id for s in store.list(**kwargs)]  # type: ignore[arg-type]

    assert ids() == [a, c, b]
    assert ids(sort="created") == [c, b, a]
    assert ids(sort="title", descending=False) == [b, a, c]
    assert ids(sort="updated", descending=False, limit=2) == [b, c]
    assert ids(notebook="x.ipynb") == [a, b]
    assert ids(model="m1") == [a, c]
    assert ids(since=350) == [a, c]  # active at or after 350
    assert ids(until=150) == [a]  # created by 150
    assert ids(since=310, until=250) == [a]
    assert ids(status="idle") == [a, c, b]
    assert ids(status=["running", "interrupted"]) == []
    by_id = {s.id: s for s in store.list()}
    assert by_id[a].cost is None  # every call's price unknown: no cost, not 0
    assert by_id[b].cost == pytest.approx(0.75)
    assert by_id[c].cost is None
    assert (by_id[a].message_count, by_id[b].message_count) == (0, 3)
    with pytest.raises(ValueError, match="sort"):
        store.list(sort="size")  # type: ignore[arg-type]


def test_last_and_rename(store: SessionStore) -> None:
    assert store.last() is None
    a = store.create(notebook_path="x.ipynb").id
    b = store.create(notebook_path="y.ipynb").id
    _touch(store.db, a, 1, 10)
    _touch(store.db, b, 2, 5)
    assert store.last() is not None
    assert store.last().id == a  # type: ignore[union-attr]
    assert store.last("y.ipynb").id == b  # type: ignore[union-attr]
    assert store.last("z.ipynb") is None
    assert store.rename(b[:8], "  my analysis ").title == "my analysis"
    assert store.get(b).title == "my analysis"


# -- delete -----------------------------------------------------------------------------------


def _count(db: Database, table: str, session_id: str) -> int:
    row = db.conn.execute(f"SELECT count(*) FROM {table} WHERE session_id = ?", (session_id,))
    return int(row.fetchone()[0])


def test_delete_cascades(store: SessionStore) -> None:
    keep = store.create().id
    gone = store.create().id
    for sid in (keep, gone):
        for message in every_kind():
            append_message(store.db, sid, message)
        with store.db.transaction() as conn:
            conn.execute(
                "INSERT INTO tool_calls (session_id, call_id, name, started_at) VALUES (?,?,?,?)",
                (sid, "c1", "run_python", time.time()),
            )
        _add_usage(store.db, sid, 0.1)
    child = store.fork(gone).id
    assert {hit.session_id for hit in search(store, "plot")} == {keep, gone, child}
    store.delete(gone)
    with pytest.raises(SessionNotFoundError):
        store.get(gone)
    for table in ("messages", "tool_calls", "usage_ledger"):
        assert _count(store.db, table, gone) == 0
        assert _count(store.db, table, keep) > 0
    assert {hit.session_id for hit in search(store, "plot")} == {keep, child}
    if not store.db.dialect.is_postgres:  # FTS5's own check; PG's index is a column
        # the index holds exactly the remaining messages (raises "malformed" otherwise)
        store.db.conn.execute(
            "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
        )
    assert store.get(child).parent_id is None  # the fork keeps its messages, loses the link
    assert store.get(child).message_count == len(every_kind())


# -- fork and lineage -------------------------------------------------------------------------


def test_fork_at_n(store: SessionStore) -> None:
    parent = store.create("original", model="m", notebook_path="a.ipynb", config={"k": 1})
    messages = every_kind()
    for message in messages:
        append_message(store.db, parent.id, message)
    with store.db.transaction() as conn:  # the approval record of c1, whose result is copied
        conn.execute(
            "INSERT INTO tool_calls (session_id, call_id, name, status, decision, started_at)"
            " VALUES (?, 'c1', 'run_python', 'done', 'approved', 1.0)",
            (parent.id,),
        )
    before = store.get(parent.id)
    fork = store.fork(parent.id, at=4)  # cuts the c1/c2 batch after c1's result
    assert (fork.parent_id, fork.link_kind, fork.fork_at) == (parent.id, "fork", 4)
    assert (fork.model, fork.notebook_path, fork.config) == ("m", "a.ipynb", {"k": 1})
    assert fork.message_count == 4
    assert load_messages(store.db, fork.id) == messages[:4]
    assert _count(store.db, "tool_calls", fork.id) == 1
    assert store.get(parent.id) == before  # the parent is untouched
    assert load_messages(store.db, parent.id) == messages
    everything = store.fork(parent.id)
    assert everything.fork_at == len(messages)
    assert load_messages(store.db, everything.id) == messages
    assert store.fork(parent.id, at=0).message_count == 0
    with pytest.raises(StoreError, match="cannot fork at 10"):
        store.fork(parent.id, at=10)
    assert [c.id for c in store.children(parent.id)][:2] == [fork.id, everything.id]
    append_message(store.db, fork.id, UserMessage(content="diverge"))
    assert store.get(parent.id).message_count == len(messages)


def test_lineage_and_compression_descendant(store: SessionStore) -> None:
    root = store.create("root").id
    fork = store.fork(root).id
    first = insert_session(store.db, parent_id=fork, link_kind="compression")
    older = insert_session(store.db, parent_id=first, link_kind="compression")
    newest = insert_session(store.db, parent_id=first, link_kind="compression")
    _touch(store.db, older, 10, 10)
    _touch(store.db, newest, 20, 20)
    side_fork = store.fork(first).id
    assert [s.id for s in store.lineage(newest)] == [root, fork, first]
    assert store.lineage(root) == []
    assert store.newest_compression_descendant(fork).id == newest
    assert store.newest_compression_descendant(root).id == root  # forks are not followed
    assert store.newest_compression_descendant(newest).id == newest
    assert {s.id for s in store.children(first)} == {older, newest, side_fork}


# -- status -----------------------------------------------------------------------------------


def test_dead_owner_becomes_interrupted(store: SessionStore) -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    dead = store.create("dead").id
    alive = store.create("alive").id
    elsewhere = store.create("elsewhere").id
    set_status(store.db, alive, "running")  # owned by this test process
    with store.db.transaction() as conn:
        conn.execute(
            "UPDATE sessions SET status = 'awaiting_approval', owner_pid = ?, owner_host = ?"
            " WHERE id = ?",
            (process.pid, socket.gethostname(), dead),
        )
        conn.execute(
            "UPDATE sessions SET status = 'running', owner_pid = ?, owner_host = 'other-host'"
            " WHERE id = ?",
            (process.pid, elsewhere),
        )
    before = store.db.conn.execute("SELECT updated_at FROM sessions WHERE id = ?", (dead,))
    updated_at = before.fetchone()[0]
    statuses = {s.id: s.status for s in store.list()}
    assert statuses == {dead: "interrupted", alive: "running", elsewhere: "running"}
    info = store.get(dead)
    assert (info.end_reason, info.updated_at) == ("interrupted", updated_at)
    assert store.mark_interrupted_if_dead() == []


# -- "always" rules ---------------------------------------------------------------------------


def test_always_rules_persist(backend: Backend) -> None:
    with backend.store() as first:
        assert first.always_rules() == {}
        policy = ApprovalPolicy(always=first.always_rules(), on_always=first.save_always_rule)
        policy.remember("run_python", True, "always")
        policy.remember("delete_file", False, "always")
        policy.remember("read_file", True, "session")  # not persisted
    with backend.store() as second:
        rules = second.always_rules()
        assert rules == {"delete_file": False, "run_python": True}
        policy = ApprovalPolicy(always=rules, on_always=second.save_always_rule)
        assert policy.decide("run_python", {}, side_effects=True).action == "allow"
        assert policy.decide("delete_file", {}, side_effects=True).action == "deny"
        second.save_always_rule("delete_file", True)
        assert second.forget_always_rule("run_python")
        assert not second.forget_always_rule("run_python")
    with backend.store() as third:
        assert third.always_rules() == {"delete_file": True}


# -- secrets ----------------------------------------------------------------------------------


def test_secret_names() -> None:
    for name in ("api_key", "apiKey", "OPENAI_API_KEY", "Authorization", "access_token",
                 "password", "client_secret", "x-api-key", "token"):  # fmt: skip
        assert is_secret_name(name), name
    for name in ("max_tokens", "model", "temperature", "keywords", "prompt_cache_key"):
        assert not is_secret_name(name), name
    assert is_secret_name("GROQ_KEY", environment=True)


def test_secret_from_the_environment_never_reaches_the_file(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-" + "7f3a9c" * 6
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    config = {
        "model": "openai:gpt-x",
        "max_tokens": 512,
        "api_key": secret,
        "provider": {"apiKey": secret, "headers": {"Authorization": f"Bearer {secret}"}},
        "base_url": f"https://proxy.example/v1?k={secret}",
        "extra": [f"x{secret}y", 3, None, True],
        "system_prompt": "be brief",
    }
    with backend.store() as store:
        info = store.create("t", model="openai:gpt-x", config=config)
        for message in every_kind():
            append_message(store.db, info.id, message)
        set_status(store.db, info.id, "idle", end_reason="completed")
        assert store.get(info.id).config == {
            "model": "openai:gpt-x",
            "max_tokens": 512,
            "provider": {"headers": {}},
            "base_url": "https://proxy.example/v1?k=[redacted]",
            "extra": ["x[redacted]y", 3, None, True],
            "system_prompt": "be brief",
        }
        if backend.pg is not None:  # every row of every table, as the server holds it
            admin = backend.pg.admin()
            for table in ("sessions", "messages", "tool_calls", "usage_ledger"):
                rows = admin.execute(f"SELECT t::text FROM mibyan.{table} t").fetchall()
                assert rows or table in ("tool_calls", "usage_ledger"), table
                assert not [row for row in rows if secret in row[0]], table
            return
        path = Path(backend.target)
        files = sorted(path.parent.glob(f"{path.name}*"))
        assert Path(f"{path}-wal") in files
        for file in files:
            assert secret.encode() not in file.read_bytes(), file
    for file in sorted(path.parent.glob(f"{path.name}*")):
        assert secret.encode() not in file.read_bytes(), file


def test_scrub_config_keeps_plain_options() -> None:
    assert scrub_config({"a": {"b": [1, "two", 3.0]}, "p": Path("x")}) == {
        "a": {"b": [1, "two", 3.0]},
        "p": "x",
    }
