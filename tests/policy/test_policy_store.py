"""Users and the audit trail in the SQLite store (migration 0006), the day's usage for the
caps and the instructor's table (on both backends: the ``backend`` fixture of
tests/store_backend.py), and the retention purge (``mibyan-admin purge``)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from store_backend import Backend

from mibyan_jupyter.admin import main as admin_main
from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store import audit
from mibyan_jupyter.store.db import Database, migrations
from mibyan_jupyter.store.records import insert_message
from mibyan_jupyter.store.session_queries import SessionNotFoundError
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.store.usage import (
    day_start,
    next_reset,
    purge_older_than,
    reset_text,
    review_rows,
    spent_since,
)


def schema_5_database(path: Path) -> None:
    """A database as schema 5 left it, with one session (no user)."""
    conn = sqlite3.connect(path)
    for number, _name, sql in migrations()[:5]:
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version={number}")
    conn.execute(
        "INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('old1', 'old', 1, 1)"
    )
    conn.commit()
    conn.close()


def test_schema_6_keeps_old_sessions_as_the_files_owners_and_tags_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite3"
    schema_5_database(path)
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    with SessionStore(path) as store:
        assert audit.session_user(store.db.conn, "old1") is None
        new = store.create("mine")
        assert audit.session_user(store.db.conn, new.id) == "alice"
        fork = store.fork(new.id)  # every way a session is made gets the user
        assert audit.session_user(store.db.conn, fork.id) == "alice"
        assert {s.id for s in store.list()} == {"old1", new.id, fork.id}  # she owns the file


def test_a_user_lists_and_resumes_only_their_own_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite3"
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    with SessionStore(path) as store:
        alices = store.create("alice's").id
    monkeypatch.setenv("JUPYTERHUB_USER", "bob")
    with SessionStore(path) as store:
        bobs = store.create("bob's").id
        assert [s.id for s in store.list()] == [bobs]
        found = store.resolve("last")
        assert found is not None
        assert found.id == bobs
        with pytest.raises(SessionNotFoundError, match=f"^no session '{alices}'$"):
            store.resolve(alices)  # in a missing id's words: never says it exists
        with pytest.raises(SessionNotFoundError, match=f"^no session '{alices}'$"):
            store.get(alices)
        with pytest.raises(SessionNotFoundError, match=f"^no session '{alices[:8]}'$"):
            store.get(alices[:8])


def test_audit_rows_are_appended_and_never_updated(tmp_path: Path) -> None:
    with Database(tmp_path / "s.sqlite3") as db:
        with db.transaction() as conn:
            audit.record(conn, "exam_refusal", {"line": "exam mode"}, user="alice")
            audit.record(conn, "policy_change", {"digest": "abc"}, user="alice")
        rows = audit.rows(db.conn, users=["alice"])
        assert [r.kind for r in rows] == ["policy_change", "exam_refusal"]
        assert rows[1].detail == {"line": "exam mode"}
        assert rows[1].session_id is None
        assert audit.last_policy_digest(db.conn) == "abc"
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.conn.execute("UPDATE audit SET kind = 'approval'")
        assert audit.rows(db.conn, users=["bob"]) == []


def bill(target: str | Path, rows: list[tuple[float, int, float]]) -> tuple[str, str]:
    """A session of the target's user billed ``(cost, tokens, at)`` rows; (user, session)."""
    with SessionStore(target) as store:
        session = store.create().id
        with store.db.transaction() as conn:
            for cost, tokens, at in rows:
                conn.execute(
                    "INSERT INTO usage_ledger (session_id, input_tokens, output_tokens, cost,"
                    " created_at) VALUES (?, ?, 0, ?, ?)",
                    (session, tokens, cost, at),
                )
        return store.db.user, session


def test_the_days_usage_counts_this_users_sessions_since_midnight_utc(backend: Backend) -> None:
    """On both backends: alice's sessions since 00:00 UTC, not yesterday's, not bob's (on
    the team store the users are login roles, and the sums run under RLS)."""
    now = time.time()
    yesterday = day_start(now) - 1
    alice, _ = bill(
        backend.as_user("alice"), [(0.25, 100, now), (0.5, 300, now), (9.0, 999, yesterday)]
    )
    bob, _ = bill(backend.as_user("bob"), [(5.0, 500, now)])
    with SessionStore(backend.as_user("alice")) as store:
        spent = spent_since(store.db.conn, alice, day_start(now))
        assert (spent.cost, spent.tokens) == (0.75, 400)
        assert spent_since(store.db.conn, bob, day_start(now)).cost == (
            0.0 if backend.is_postgres else 5.0
        )
    assert next_reset(now) - day_start(now) == 86_400
    assert reset_text(day_start(now) + 3600 * 21 + 60 * 12).startswith("00:00 UTC (in 2 h 48 min)")


def test_the_review_table_lists_searches_and_counts(backend: Backend) -> None:
    """On both backends: the sessions of the users asked for, newest first, with their
    messages, tokens and cost; ``search`` is a case-insensitive substring (dialect's
    ``contains``); the audit rows are the store user's even when nothing names it."""
    with SessionStore(backend.as_user("alice")) as store:
        alice = store.db.user
        kept = store.create("recent").id
        old = store.create("old").id
        with store.db.transaction() as conn:
            insert_message(conn, kept, UserMessage(content="What is a p-value? 100%_sure"))
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86_400, old)
            )
            conn.execute(
                "INSERT INTO usage_ledger (session_id, input_tokens, output_tokens, cost,"
                " created_at) VALUES (?, 10, 5, 0.5, ?)",
                (kept, time.time()),
            )
            audit.record(conn, "approval", {"tool": "run_python"}, session_id=kept)
            audit.record(conn, "cap_hit", {"line": "cap"}, user=alice)
        rows = review_rows(store.db, [alice])
        assert [r.session_id for r in rows] == [kept, old]
        assert (rows[0].messages, rows[0].tokens, rows[0].cost) == (1, 15, 0.5)
        assert (rows[1].messages, rows[1].tokens, rows[1].cost) == (0, 0, None)
        assert [r.session_id for r in review_rows(store.db, [alice], search="P-VALUE")] == [kept]
        assert [r.session_id for r in review_rows(store.db, [alice], search="0%_s")] == [kept]
        assert review_rows(store.db, [alice], search="q-value") == []
        assert review_rows(store.db, ["bob"]) == []
        trail = audit.rows(store.db.conn, users=[alice])
        assert [(r.kind, r.user_name) for r in trail] == [("cap_hit", alice), ("approval", alice)]


def test_the_purge_deletes_old_sessions_and_audit_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite, the user's own file (the team store's purge is an admin's: tests/pg/
    test_pg_classroom.py)."""
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    with SessionStore(tmp_path / "s.sqlite3") as store:
        kept = store.create("recent").id
        old = store.create("old").id
        with store.db.transaction() as conn:
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 40 * 86_400, old)
            )
            audit.record(conn, "approval", {"tool": "run_python"})
            conn.execute("INSERT INTO audit (at, user_name, kind) VALUES (1, 'alice', 'cap_hit')")
        assert purge_older_than(store.db, 30) == (1, 1)
        assert [s.id for s in store.list()] == [kept]


def test_the_admin_command_purges_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite3"
    with SessionStore(path) as store:
        old = store.create("old").id
        with store.db.transaction() as conn:
            conn.execute("UPDATE sessions SET updated_at = 0 WHERE id = ?", (old,))
    assert admin_main(["purge", "--older-than", "7", "--db", str(path), "--dry-run"]) == 0
    assert "would delete 1 session(s)" in capsys.readouterr().out
    assert admin_main(["purge", "--older-than", "7", "--db", str(path)]) == 0
    assert "deleted 1 session(s), 0 audit row(s) older than 7 days" in capsys.readouterr().out
    assert admin_main(["purge", "--older-than", "0", "--db", str(path)]) == 1
    assert "at least 1 day" in capsys.readouterr().err
