"""The session database's schema and the rules for opening a file.

A blank database migrates to exactly the schema below (written out, so a change to a
migration shows up here as a diff); a database made by the first schema migrates forward
with its rows intact; files from a newer version, corrupt files and unreadable paths are
refused with an error naming the file, and are never modified; two processes opening a
fresh file at once both succeed.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mibyan_jupyter.core.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.store.db import LATEST, Database, StoreError, default_path, migrations
from mibyan_jupyter.store.records import load_messages

WORKERS = Path(__file__).parent / "store_workers"

EXPECTED_SCHEMA = [
    (
        "table",
        "approval_rules",
        "approval_rules",
        "CREATE TABLE approval_rules (\n"
        "    tool       TEXT PRIMARY KEY,\n"
        "    approved   INTEGER NOT NULL,\n"
        "    created_at REAL NOT NULL\n"
        # Migration 0004 (who wrote a saved rule, its signature) added these.
        ", origin TEXT, mac TEXT, flagged_at REAL) STRICT",
    ),
    # Migration 0006 (whose a session is, the audit trail) added these.
    (
        "table",
        "audit",
        "audit",
        "CREATE TABLE audit (\n"
        "    id         INTEGER PRIMARY KEY AUTOINCREMENT,\n"
        "    at         REAL NOT NULL,\n"
        "    user_name  TEXT NOT NULL,\n"
        "    session_id TEXT,\n"
        "    kind       TEXT NOT NULL\n"
        "               CHECK (kind IN ('approval', 'policy_denial', 'cap_hit', 'exam_refusal', 'policy_change')),\n"
        "    detail     TEXT NOT NULL DEFAULT '{}'\n"
        ") STRICT",
    ),
    (
        "trigger",
        "audit_append_only",
        "audit",
        "CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit\n"
        "BEGIN\n"
        "    SELECT RAISE(ABORT, 'audit rows are append-only');\n"
        "END",
    ),
    ("index", "audit_by_session", "audit", "CREATE INDEX audit_by_session ON audit(session_id)"),
    ("index", "audit_by_user", "audit", "CREATE INDEX audit_by_user ON audit(user_name, at)"),
    (
        "table",
        "fts_state",
        "fts_state",
        "CREATE TABLE fts_state (\n"
        "    id           INTEGER PRIMARY KEY CHECK (id = 1),\n"
        "    indexed_upto INTEGER NOT NULL\n"
        ") STRICT",
    ),
    (
        "table",
        "messages",
        "messages",
        "CREATE TABLE messages (\n"
        "    id           INTEGER PRIMARY KEY AUTOINCREMENT,\n"
        "    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
        "    seq          INTEGER NOT NULL,\n"
        "    role         TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),\n"
        "    text         TEXT NOT NULL DEFAULT '',\n"
        "    data         TEXT NOT NULL,\n"
        "    tool_calls   TEXT,\n"
        "    tool_call_id TEXT,\n"
        "    tool_name    TEXT,\n"
        "    stop_reason  TEXT,\n"
        "    usage        TEXT,\n"
        "    model        TEXT,\n"
        "    aborted      INTEGER NOT NULL DEFAULT 0,\n"
        "    created_at   REAL NOT NULL,\n"
        "    UNIQUE (session_id, seq)\n"
        ") STRICT",
    ),
    (
        "table",
        "messages_fts",
        "messages_fts",
        "CREATE VIRTUAL TABLE messages_fts USING fts5(\n"
        "    text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'\n"
        ")",
    ),
    (
        "table",
        "messages_fts_config",
        "messages_fts_config",
        "CREATE TABLE 'messages_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID",
    ),
    (
        "table",
        "messages_fts_data",
        "messages_fts_data",
        "CREATE TABLE 'messages_fts_data'(id INTEGER PRIMARY KEY, block BLOB)",
    ),
    (
        "trigger",
        "messages_fts_delete",
        "messages",
        "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages\n"
        "WHEN old.id <= (SELECT indexed_upto FROM fts_state WHERE id = 1) BEGIN\n"
        "    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);\n"
        "END",
    ),
    (
        "table",
        "messages_fts_docsize",
        "messages_fts_docsize",
        "CREATE TABLE 'messages_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB)",
    ),
    (
        "table",
        "messages_fts_idx",
        "messages_fts_idx",
        "CREATE TABLE 'messages_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID",
    ),
    (
        "trigger",
        "messages_fts_update",
        "messages",
        "CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages\n"
        "WHEN old.id <= (SELECT indexed_upto FROM fts_state WHERE id = 1) BEGIN\n"
        "    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);\n"
        "    INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);\n"
        "END",
    ),
    (
        "table",
        "sessions",
        "sessions",
        # Migration 0005 rebuilt it (link_kind 'delegation'); SQLite quotes a renamed table.
        'CREATE TABLE "sessions" (\n'
        "    id            TEXT PRIMARY KEY,\n"
        "    parent_id     TEXT REFERENCES sessions(id) ON DELETE SET NULL,\n"
        "    link_kind     TEXT CHECK (link_kind IN ('fork', 'compression', 'delegation')),\n"
        "    fork_at       INTEGER,\n"
        "    title         TEXT NOT NULL DEFAULT '',\n"
        "    model         TEXT,\n"
        "    api_mode      TEXT,\n"
        "    notebook_path TEXT,\n"
        "    status        TEXT NOT NULL DEFAULT 'idle'\n"
        "                  CHECK (status IN ('idle', 'running', 'awaiting_approval', 'interrupted')),\n"
        "    owner_pid     INTEGER,\n"
        "    owner_host    TEXT,\n"
        "    config        TEXT NOT NULL DEFAULT '{}',\n"
        "    created_at    REAL NOT NULL,\n"
        "    updated_at    REAL NOT NULL,\n"
        "    ended_at      REAL,\n"
        "    end_reason    TEXT,\n"
        "    lease_token   TEXT,\n"
        "    lease_pid     INTEGER,\n"
        "    lease_host    TEXT,\n"
        "    lease_heartbeat_at REAL\n"
        # Migration 0006 added user_name.
        ", user_name TEXT) STRICT",
    ),
    (
        "index",
        "sessions_by_notebook",
        "sessions",
        "CREATE INDEX sessions_by_notebook ON sessions(notebook_path, updated_at)",
    ),
    (
        "index",
        "sessions_by_parent",
        "sessions",
        "CREATE INDEX sessions_by_parent ON sessions(parent_id)",
    ),
    (
        "index",
        "sessions_by_updated",
        "sessions",
        "CREATE INDEX sessions_by_updated ON sessions(updated_at)",
    ),
    (
        "index",
        "sessions_by_user",
        "sessions",
        "CREATE INDEX sessions_by_user ON sessions(user_name, updated_at)",
    ),
    (
        "index",
        "sqlite_autoindex_approval_rules_1",
        "approval_rules",
        None,
    ),
    (
        "index",
        "sqlite_autoindex_messages_1",
        "messages",
        None,
    ),
    (
        "index",
        "sqlite_autoindex_sessions_1",
        "sessions",
        None,
    ),
    (
        "index",
        "sqlite_autoindex_tool_calls_1",
        "tool_calls",
        None,
    ),
    (
        "index",
        "sqlite_autoindex_tool_results_1",
        "tool_results",
        None,
    ),
    (
        "table",
        "sqlite_sequence",
        "sqlite_sequence",
        "CREATE TABLE sqlite_sequence(name,seq)",
    ),
    (
        "table",
        "tool_calls",
        "tool_calls",
        "CREATE TABLE tool_calls (\n"
        "    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
        "    call_id      TEXT NOT NULL,\n"
        "    name         TEXT NOT NULL,\n"
        "    arguments    TEXT NOT NULL DEFAULT '',\n"
        "    status       TEXT NOT NULL DEFAULT 'running'\n"
        "                 CHECK (status IN ('running', 'awaiting_approval', 'done', 'error', 'cancelled')),\n"
        "    decision     TEXT CHECK (decision IN ('approved', 'denied')),\n"
        "    scope        TEXT CHECK (scope IN ('once', 'session', 'always')),\n"
        "    decided_by   TEXT,\n"
        "    reason       TEXT,\n"
        "    requested_at REAL,\n"
        "    decided_at   REAL,\n"
        "    started_at   REAL NOT NULL,\n"
        "    finished_at  REAL,\n"
        "    PRIMARY KEY (session_id, call_id)\n"
        ") STRICT",
    ),
    # Migration 0003 (big tool results kept in full) added these.
    (
        "table",
        "tool_results",
        "tool_results",
        "CREATE TABLE tool_results (\n"
        "    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
        "    result_id  TEXT NOT NULL,\n"
        "    call_id    TEXT NOT NULL,\n"
        "    tool_name  TEXT NOT NULL,\n"
        "    content    TEXT NOT NULL,\n"
        "    chars      INTEGER NOT NULL,\n"
        "    created_at REAL NOT NULL,\n"
        "    PRIMARY KEY (session_id, result_id)\n"
        ") STRICT",
    ),
    (
        "index",
        "tool_results_by_id",
        "tool_results",
        "CREATE UNIQUE INDEX tool_results_by_id ON tool_results(result_id)",
    ),
    (
        "index",
        "usage_by_session",
        "usage_ledger",
        "CREATE INDEX usage_by_session ON usage_ledger(session_id)",
    ),
    (
        "table",
        "usage_ledger",
        "usage_ledger",
        "CREATE TABLE usage_ledger (\n"
        "    id            INTEGER PRIMARY KEY,\n"
        "    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
        "    message_seq   INTEGER,\n"
        "    model         TEXT,\n"
        "    provider      TEXT,\n"
        "    api           TEXT,\n"
        "    input_tokens  INTEGER NOT NULL DEFAULT 0,\n"
        "    output_tokens INTEGER NOT NULL DEFAULT 0,\n"
        "    cache_read    INTEGER NOT NULL DEFAULT 0,\n"
        "    cache_write   INTEGER NOT NULL DEFAULT 0,\n"
        "    reasoning     INTEGER NOT NULL DEFAULT 0,\n"
        "    cost          REAL,\n"
        "    latency_ms    REAL,\n"
        "    retries       INTEGER NOT NULL DEFAULT 0,\n"
        "    fallback_from TEXT,\n"
        "    created_at    REAL NOT NULL\n"
        ") STRICT",
    ),
]


def schema(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
    return [tuple(row) for row in rows]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def siblings(path: Path) -> list[str]:
    """The -wal / -shm / -journal files next to ``path`` (none may appear on a refusal)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))


# -- a blank database -----------------------------------------------------------------------


def test_a_blank_database_migrates_to_the_exact_schema(tmp_path: Path) -> None:
    with Database(tmp_path / "s.sqlite3") as db:
        assert schema(db.conn) == EXPECTED_SCHEMA
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert db.conn.execute("SELECT id, indexed_upto FROM fts_state").fetchall() == [(1, 0)]


def test_migrations_are_numbered_from_one_and_latest_is_the_last() -> None:
    numbers = [number for number, _, _ in migrations()]
    assert numbers == list(range(1, LATEST + 1))
    assert migrations()[0][1] == "init"


def test_reopening_a_current_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    Database(path).close()
    before = digest(path)
    with Database(path) as db:
        assert schema(db.conn) == EXPECTED_SCHEMA
    assert digest(path) == before


# -- a database made by the first schema ----------------------------------------------------

MESSAGES = [
    UserMessage(content="Plot the sales", timestamp=1.0),
    AssistantMessage(
        content="Reading.",
        tool_calls=(ToolCall(id="c1", function=FunctionCall(name="read", arguments="{}")),),
        stop_reason="tool_use",
        usage=Usage(input=10, output=3, total=13, cost=0.5),
        model="m",
        timestamp=2.0,
    ),
    ToolMessage(tool_call_id="c1", name="read", content="42", timestamp=3.0),
]


def first_schema_database(path: Path) -> None:
    """What version 1 of the package left on disk: only migration 0001 applied, by hand,
    with rows in every table written in that schema's terms."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number, _name, sql in migrations()[:1]:
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version={number}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "INSERT INTO sessions (id, title, model, status, created_at, updated_at)"
        " VALUES ('s1', 'Plot the sales', 'openai:gpt-4.1', 'idle', 1.0, 3.0)"
    )
    for seq, message in enumerate(MESSAGES):
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
            " VALUES ('s1', ?, ?, ?, ?, ?)",
            (seq, message.role, f"text {seq}", MESSAGE_ADAPTER.dump_json(message).decode(), 1.0),
        )
    conn.execute(
        "INSERT INTO tool_calls (session_id, call_id, name, arguments, status, decision,"
        " scope, decided_by, started_at) VALUES ('s1', 'c1', 'read', '{}', 'done', 'approved',"
        " 'once', 'user', 2.0)"
    )
    conn.execute(
        "INSERT INTO usage_ledger (session_id, message_seq, model, input_tokens, cost,"
        " created_at) VALUES ('s1', 1, 'm', 10, 0.5, 2.0)"
    )
    conn.execute("INSERT INTO approval_rules (tool, approved, created_at) VALUES ('read', 1, 1)")
    conn.close()


ROW_QUERIES = {
    "sessions": "SELECT id, title, model, status FROM sessions",
    "messages": "SELECT session_id, seq, role, text, data FROM messages ORDER BY seq",
    "tool_calls": "SELECT call_id, name, status, decision, scope, decided_by FROM tool_calls",
    "usage_ledger": "SELECT message_seq, model, input_tokens, cost FROM usage_ledger",
    "approval_rules": "SELECT tool, approved FROM approval_rules",
}


def test_a_database_made_by_the_first_schema_migrates_forward(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    first_schema_database(path)
    with sqlite3.connect(path) as conn:
        before = {table: conn.execute(query).fetchall() for table, query in ROW_QUERIES.items()}
    conn.close()
    assert all(before.values())
    with Database(path) as db:
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        # Migrated forward, it is indistinguishable from a blank database made today.
        assert schema(db.conn) == EXPECTED_SCHEMA
        after = {table: db.conn.execute(query).fetchall() for table, query in ROW_QUERIES.items()}
        assert after == before
        assert load_messages(db, "s1") == MESSAGES
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_database_made_by_the_second_schema_migrates_forward(tmp_path: Path) -> None:
    """Schema 2 (the lease) gains the results table and keeps every row."""
    path = tmp_path / "two.sqlite3"
    first_schema_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(migrations()[1][2])
    conn.execute("PRAGMA user_version=2")
    conn.close()
    with Database(path) as db:
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
        assert schema(db.conn) == EXPECTED_SCHEMA
        assert load_messages(db, "s1") == MESSAGES
        assert db.conn.execute("SELECT count(*) FROM tool_results").fetchone()[0] == 0


# -- files that are refused -----------------------------------------------------------------


@pytest.mark.parametrize("journal_mode", ["delete", "wal"])
def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path, journal_mode: str) -> None:
    path = tmp_path / "newer.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode={journal_mode}")
    conn.execute("CREATE TABLE future (x TEXT)")
    conn.execute("INSERT INTO future VALUES ('from a newer version')")
    conn.execute(f"PRAGMA user_version={LATEST + 1}")
    conn.close()
    before, files = digest(path), siblings(path)
    assert files == []
    with pytest.raises(StoreError, match="newer") as caught:
        Database(path)
    assert str(path) in str(caught.value)
    assert f"schema {LATEST + 1}" in str(caught.value)
    assert digest(path) == before
    assert siblings(path) == []


def test_random_bytes_are_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "noise.sqlite3"
    path.write_bytes(random.Random(1).randbytes(8192))
    before = digest(path)
    with pytest.raises(StoreError, match="not a SQLite database") as caught:
        Database(path)
    assert str(path) in str(caught.value)
    assert digest(path) == before
    assert siblings(path) == []


def test_a_database_with_a_garbled_first_page_is_refused_and_left_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "garbled.sqlite3"
    Database(path).close()
    data = bytearray(path.read_bytes())
    assert data[:16] == b"SQLite format 3\x00"
    # Bytes 100-200 hold the b-tree page header of sqlite_master and its cell pointers.
    data[100:200] = random.Random(2).randbytes(100)
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(StoreError, match="not a usable SQLite database") as caught:
        Database(path)
    assert str(path) in str(caught.value)
    assert "left untouched" in str(caught.value)
    assert digest(path) == before
    assert siblings(path) == []


def test_a_directory_where_the_file_should_be_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.mkdir()
    with pytest.raises(StoreError) as caught:
        Database(path)
    assert str(path) in str(caught.value)
    assert list(path.iterdir()) == []


# -- where the file is ----------------------------------------------------------------------


def test_default_path_honours_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "mine.sqlite3"))
    assert default_path() == tmp_path / "mine.sqlite3"
    monkeypatch.setenv("MIBYAN_DB", "~/elsewhere.sqlite3")
    assert default_path() == Path.home() / "elsewhere.sqlite3"


def test_default_path_is_under_the_jupyter_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_core.paths import jupyter_data_dir

    monkeypatch.delenv("MIBYAN_DB", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert Path(jupyter_data_dir()) == tmp_path / "data"
    assert default_path() == tmp_path / "data" / "mibyan" / "sessions.sqlite3"
    with Database() as db:  # the folder is created on first use
        assert db.path == default_path()
    assert default_path().is_file()


# -- several kernels at once ----------------------------------------------------------------


@pytest.mark.slow  # real processes racing to create one file: ~1-4 s
def test_processes_opening_fresh_files_at_once_all_succeed(tmp_path: Path) -> None:
    """The migration race: every process sees schema 0, one migrates inside its write
    transaction, the others find the work done when they get the lock. Three files, three
    processes each, released together once all have imported."""
    paths = [tmp_path / f"race{n}.sqlite3" for n in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKERS / "open_db.py"), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for path in paths
        for _ in range(3)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=30)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * len(procs), outputs
    assert all(out.strip() == f"ok {LATEST}" for out in outputs), outputs
    for path in paths:
        with Database(path) as db:
            assert schema(db.conn) == EXPECTED_SCHEMA
            assert db.conn.execute("SELECT count(*) FROM fts_state").fetchone()[0] == 1
