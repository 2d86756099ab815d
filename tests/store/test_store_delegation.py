"""Delegated child sessions in the store (issue 13, part 3): migration 0005 rebuilds the
sessions table so ``link_kind`` allows 'delegation' without losing a row of a database
made by schema 4, and a child session is linked to its parent but never taken for the
parent's continuation (resume stays on the parent; listings hide children unless asked)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backend import Backend

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.store import db as store_db
from mibyan_jupyter.store.db import FOREIGN_KEYS_OFF, Database, StoreError, migrations
from mibyan_jupyter.store.lineage import delegated_children, lineage_messages
from mibyan_jupyter.store.records import MESSAGE_ADAPTER, append_message, insert_session
from mibyan_jupyter.store.resume import resume_agent
from mibyan_jupyter.store.search import search
from mibyan_jupyter.store.session_queries import DELEGATION
from mibyan_jupyter.store.sessions import SessionStore

MESSAGES = [
    UserMessage(content="Count the apples", timestamp=1.0),
    AssistantMessage(
        content="Looking.",
        tool_calls=(ToolCall(id="c1", function=FunctionCall(name="read", arguments="{}")),),
        stop_reason="tool_use",
        timestamp=2.0,
    ),
    ToolMessage(tool_call_id="c1", name="read", content="7 apples", timestamp=3.0),
]

TABLES = {
    "sessions": "SELECT rowid, * FROM sessions ORDER BY rowid",
    "messages": "SELECT * FROM messages ORDER BY id",
    "tool_calls": "SELECT * FROM tool_calls ORDER BY session_id, call_id",
    "usage_ledger": "SELECT * FROM usage_ledger ORDER BY id",
    "tool_results": "SELECT * FROM tool_results ORDER BY result_id",
    "approval_rules": "SELECT * FROM approval_rules ORDER BY tool",
    "fts_state": "SELECT * FROM fts_state",
}


def schema_four_database(path: Path) -> None:
    """What schema 4 left on disk, rows in every table: a root session, a fork of it and a
    compaction's child, their messages (indexed for search), a tool call, a ledger row, a
    kept result, a lease and a saved rule."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number, _name, sql in migrations()[:4]:
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version={number}")
    conn.execute("PRAGMA journal_mode=WAL")
    rows = [
        ("s1", None, None, None, "Count", "idle", None),
        ("s2", "s1", "fork", 2, "Count (fork)", "idle", None),
        ("s3", "s1", "compression", 1, "Count", "running", "tok-3"),
    ]
    for sid, parent, kind, fork_at, title, status, token in rows:
        conn.execute(
            "INSERT INTO sessions (id, parent_id, link_kind, fork_at, title, model, status,"
            " config, created_at, updated_at, lease_token, lease_pid, lease_host,"
            " lease_heartbeat_at) VALUES (?,?,?,?,?,'openai:m',?,'{\"tools\": \"inspect\"}',"
            " 1.0, 2.0, ?, 42, 'h', 3.0)",
            (sid, parent, kind, fork_at, title, status, token),
        )
    for sid in ("s1", "s2", "s3"):
        for seq, message in enumerate(MESSAGES):
            conn.execute(
                "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
                " VALUES (?, ?, ?, ?, ?, 1.0)",
                (
                    sid,
                    seq,
                    message.role,
                    f"{sid} apples {seq}",
                    MESSAGE_ADAPTER.dump_json(message).decode(),
                ),
            )
    conn.execute("INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages")
    conn.execute("UPDATE fts_state SET indexed_upto = (SELECT max(id) FROM messages)")
    conn.execute(
        "INSERT INTO tool_calls (session_id, call_id, name, arguments, status, decision,"
        " scope, decided_by, started_at) VALUES ('s1', 'c1', 'read', '{}', 'done',"
        " 'approved', 'once', 'user', 2.0)"
    )
    conn.execute(
        "INSERT INTO usage_ledger (session_id, message_seq, model, input_tokens, cost,"
        " created_at) VALUES ('s1', 1, 'm', 10, 0.5, 2.0)"
    )
    conn.execute(
        "INSERT INTO tool_results VALUES ('s1', 'r1', 'c1', 'read', 'all the apples', 14, 3.0)"
    )
    conn.execute(
        "INSERT INTO approval_rules (tool, approved, created_at, origin, mac)"
        " VALUES ('read', 1, 1.0, 'cell', 'x')"
    )
    conn.close()


def snapshot(conn: sqlite3.Connection) -> dict[str, list[Any]]:
    return {table: conn.execute(query).fetchall() for table, query in TABLES.items()}


def test_migration_0005_rebuilds_sessions_on_a_schema_4_database_and_keeps_every_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "four.sqlite3"
    schema_four_database(path)
    with sqlite3.connect(path) as conn:
        before = snapshot(conn)
    conn.close()
    assert all(before.values())
    with Database(path) as db:
        conn = db.conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 5
        after = snapshot(conn)
        after["sessions"] = [row[: len(before["sessions"][0])] for row in after["sessions"]]
        assert after == before  # rowids, links, leases, configs: all as they were
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # on again
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        indexes = {row[1] for row in conn.execute("PRAGMA index_list(sessions)")}
        assert {"sessions_by_updated", "sessions_by_notebook", "sessions_by_parent"} <= indexes
        # the other tables still reference the rebuilt table: a delete cascades
        references = {
            row[2]
            for table in ("messages", "tool_calls", "usage_ledger", "tool_results")
            for row in conn.execute(f"PRAGMA foreign_key_list({table})")
        }
        assert references == {"sessions"}
        # the new link kind is allowed, an unknown one still is not
        insert_session(db, session_id="c1", parent_id="s1", link_kind=DELEGATION)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            insert_session(db, session_id="c2", parent_id="s1", link_kind="adoption")
        # search still finds the migrated messages
        assert {hit.session_id for hit in search(db, "apples")} == {"s1", "s2", "s3"}
        with db.transaction() as tx:
            tx.execute("DELETE FROM sessions WHERE id = 's2'")
        assert (
            conn.execute("SELECT count(*) FROM messages WHERE session_id = 's2'").fetchone()[0] == 0
        )


def test_a_rebuild_that_would_break_a_foreign_key_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite3"
    Database(path).close()
    real = migrations()
    bad = f"{FOREIGN_KEYS_OFF}\nDELETE FROM sessions WHERE id = 'p';\n"
    monkeypatch.setattr(store_db, "migrations", lambda: [*real, (len(real) + 1, "bad", bad)])
    monkeypatch.setattr(store_db, "LATEST", len(real) + 1)
    with sqlite3.connect(path) as conn:  # a session with a message, as any store holds
        conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('p', 1, 1)")
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, data, created_at)"
            " VALUES ('p', 0, 'user', '{}', 1)"
        )
    conn.close()
    with pytest.raises(StoreError, match="foreign key"):
        Database(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(real)
        assert conn.execute("SELECT id FROM sessions").fetchall() == [("p",)]
    conn.close()


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


def child_of(store: SessionStore, parent: str, goal: str) -> str:
    child = insert_session(
        store.db,
        parent_id=parent,
        link_kind=DELEGATION,
        title=goal,
        config={"delegation": {"child_id": "child-1", "goal": goal, "parent_call_id": "c9"}},
    )
    append_message(store.db, child, UserMessage(content=goal, timestamp=time.time()))
    append_message(store.db, child, AssistantMessage(content="7 pears", timestamp=time.time()))
    return child


def test_a_child_session_is_linked_but_resume_and_listings_stay_on_the_parent(
    store: SessionStore,
) -> None:
    parent = store.create("Count the fruit", model="openai:m").id
    for message in MESSAGES:
        append_message(store.db, parent, message)
    time.sleep(0.01)  # the child is the most recently updated session
    child = child_of(store, parent, "count the pears")
    info = store.get(child)
    assert (info.parent_id, info.link_kind) == (parent, "delegation")
    assert store.resolve("last").id == parent  # type: ignore[union-attr]
    assert store.resolve(parent).id == parent  # type: ignore[union-attr]
    assert [s.id for s in store.list()] == [parent]
    assert [s.id for s in store.list(delegated=True)] == [child, parent]
    assert [s.id for s in delegated_children(store.db, parent)] == [child]
    # the lineage of each is its own: a child is no continuation, nor has one
    assert lineage_messages(store.db, parent) == MESSAGES
    assert [m.role for m in lineage_messages(store.db, child)] == ["user", "assistant"]
    agent, resumed = resume_agent(store, "last", stream_fn=None)  # type: ignore[arg-type]
    assert resumed.id == parent
    assert agent.state.messages == MESSAGES
    # a child asked for by its id is a session of its own
    assert store.resolve(child).id == child  # type: ignore[union-attr]


def test_children_of_a_compacted_conversation_are_found_from_its_newest_session(
    store: SessionStore,
) -> None:
    root = store.create("long").id
    before = child_of(store, root, "before the compaction")
    newer = insert_session(store.db, parent_id=root, link_kind="compression", fork_at=0)
    after = child_of(store, newer, "after the compaction")
    assert [s.id for s in delegated_children(store.db, newer)] == [before, after]
    assert [s.id for s in delegated_children(store.db, root)] == [before]


def test_the_sessions_apis_export_and_transcript_carry_the_children(store: SessionStore) -> None:
    """The sessions panel's download (server/documents.py) includes what each child did,
    as ``%agent export`` does, and its read-only transcript folds the child under the
    parent's call."""
    from mibyan_jupyter.server.documents import export, transcript

    parent = store.create("Count the fruit").id
    call = ToolCall(id="c9", function=FunctionCall(name="delegate_task", arguments="{}"))
    for message in (
        UserMessage(content="count"),
        AssistantMessage(content="", tool_calls=(call,), stop_reason="tool_use"),
        ToolMessage(tool_call_id="c9", name="delegate_task", content="7 pears"),
    ):
        append_message(store.db, parent, message)
    child = child_of(store, parent, "count the pears")
    markdown = export(store, parent, "md")
    text = markdown.body.decode()
    assert "Child agent `child-1`" in text
    assert child in text
    assert text.index("7 pears") < text.rindex("7 pears")  # the result, then the child's reply
    assert "1 delegated child agent" in markdown.includes
    notebook = export(store, parent, "ipynb").body.decode()
    assert f"{child[:32]}-child" in notebook  # the child's heading cell
    html = transcript(store, parent)["html"]
    assert html.count('<details class="mibyan-child"') == 1
