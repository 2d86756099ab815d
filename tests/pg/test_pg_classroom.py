"""The classroom on the team store: review, audit, usage and retention as real login roles.

Two courses on one database (cs1: instructor ivy, students ada and bob; art: instructor
oda, student cat). Each student writes their own session, its messages, usage and audit
rows through their own ``SessionStore(url)``. Then ``%agent review`` (the command's code, in
this process, on a kernel state opened on the instructor's URL) lists, searches and reads
the audit of exactly the instructor's students, the roster being the database's; a student
is refused in one line; raw SQL as the instructor shows what row-level security lets them
read and refuses what it does not; ``mibyan-admin purge`` runs as an admin role
(docs/architecture.md, "Admin policy": its Instructor review, Audit trail, Retention).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgTestDb, PgUser
from policy_support import policy_folder, write_policy

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.review import review
from mibyan_jupyter.jupyter.commands.tables import Table
from mibyan_jupyter.jupyter.state import reset_kernel_state
from mibyan_jupyter.store import audit
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.store.usage import spent_since

DAY = 86_400.0


@pytest.fixture
def reviewable(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with policy_folder() as path:
        write_policy(path, "[review]\nreviewable = true\nretention_days = 30\n")
        monkeypatch.setenv("MIBYAN_POLICY", str(path))
        yield path
    reset_kernel_state()


def work(pg_db: PgTestDb, user: PgUser, words: str, cost: float, age_days: float = 0) -> str:
    """A session of ``user``'s own, made through the store as their login role: one user
    message, one ledger row, one audit row (``age_days`` old)."""
    store = SessionStore(pg_db.url(user.name))
    try:
        at = time.time() - age_days * DAY
        info = store.create(f"{user.name} on {words}", model="demo")
        with store.db.transaction() as conn:
            conn.execute(
                "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
                " VALUES (?, 0, 'user', ?, '{}', ?)",
                (info.id, words, at),
            )
            conn.execute(
                "INSERT INTO usage_ledger (session_id, message_seq, model, input_tokens,"
                " output_tokens, cost, created_at) VALUES (?, 0, 'demo', 100, 20, ?, ?)",
                (info.id, cost, at),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (at, info.id))
            audit.record(conn, "cap_hit", {"line": f"{words} cap"}, session_id=info.id)
            audit.record(conn, "policy_change", {"digest": "d"}, user=store.db.user)
        if age_days:  # audit rows are append-only for users: the superuser ages them
            pg_db.admin().execute(
                "UPDATE mibyan.audit SET at = %s WHERE session_id = %s", (at, info.id)
            )
        return info.id
    finally:
        store.close()


@pytest.fixture
def classroom(pg_db: PgTestDb) -> dict[str, Any]:
    people = {
        "ivy": pg_db.user("ivy", course="cs1", role="instructor"),
        "ada": pg_db.user("ada", course="cs1"),
        "bob": pg_db.user("bob", course="cs1"),
        "oda": pg_db.user("oda", course="art", role="instructor"),
        "cat": pg_db.user("cat", course="art"),
    }
    sessions = {
        "ada": work(pg_db, people["ada"], "recursion homework", 0.25),
        "bob": work(pg_db, people["bob"], "sorting lists", 0.5),
        "cat": work(pg_db, people["cat"], "colour theory", 1.0),
    }
    return {"people": people, "sessions": sessions}


def as_kernel_of(pg_db: PgTestDb, user: PgUser) -> None:
    reset_kernel_state(pg_db.url(user.name))


def test_an_instructor_reviews_exactly_their_students(
    pg_db: PgTestDb, classroom: dict[str, Any], reviewable: Path
) -> None:
    people, sessions = classroom["people"], classroom["sessions"]
    as_kernel_of(pg_db, people["ivy"])
    table = review([])
    assert isinstance(table, Table)
    users = sorted(row[0] for row in table.rows)
    assert users == sorted([people["ada"].name, people["bob"].name])
    assert table.note == "total $0.7500"
    ada_row = next(row for row in table.rows if row[0] == people["ada"].name)
    assert ada_row[4:6] == ["1", "120"]
    searched = review(["--search", "RECURSION"])
    assert isinstance(searched, Table)
    assert [row[0] for row in searched.rows] == [people["ada"].name]
    trail = review(["--audit"])
    assert isinstance(trail, Table)
    assert {row[1] for row in trail.rows} == {people["ada"].name, people["bob"].name}
    assert sessions["cat"][:8] not in repr(trail.rows)
    with pytest.raises(AgentUsageError, match="is not a student of cs1"):
        review(["--user", people["cat"].name])
    with pytest.raises(AgentUsageError, match="not an instructor of 'art'"):
        review(["--course", "art"])


def test_a_student_is_refused_in_one_line(
    pg_db: PgTestDb, classroom: dict[str, Any], reviewable: Path
) -> None:
    ada = classroom["people"]["ada"]
    as_kernel_of(pg_db, ada)
    with pytest.raises(AgentUsageError) as refused:
        review([])
    assert str(refused.value) == (
        f"only a course's instructors can review, and the roster names {ada.name} in none"
    )


def test_review_exports_a_students_sessions_with_the_appendix(
    pg_db: PgTestDb, classroom: dict[str, Any], reviewable: Path, tmp_path: Path
) -> None:
    people, sessions = classroom["people"], classroom["sessions"]
    as_kernel_of(pg_db, people["ivy"])
    done = review(["--user", people["ada"].name, "--export", str(tmp_path), "--format", "md"])
    assert "Wrote 1 session(s)" in repr(done)
    written = tmp_path / f"{people['ada'].name}-{sessions['ada'][:8]}.md"
    assert "recursion homework" in written.read_text(encoding="utf-8")
    appendix = (tmp_path / f"{people['ada'].name}-appendix.md").read_text(encoding="utf-8")
    assert sessions["ada"][:8] in appendix


def test_what_row_level_security_lets_an_instructor_read_and_do(
    pg_db: PgTestDb, classroom: dict[str, Any]
) -> None:
    """Raw SQL as ivy: her students' audit rows and sessions, never art's; reading only."""
    people, sessions = classroom["people"], classroom["sessions"]
    ivy = pg_db.connect_as(people["ivy"])
    seen = {row[0] for row in ivy.execute("SELECT user_name FROM mibyan.audit")}
    assert seen == {people["ada"].name, people["bob"].name}
    listed = {row[0] for row in ivy.execute("SELECT id FROM mibyan.sessions")}
    assert listed == {sessions["ada"], sessions["bob"]}
    changed = ivy.execute(
        "UPDATE mibyan.sessions SET title = 'mine now' WHERE id = %s", (sessions["ada"],)
    )
    assert changed.rowcount == 0
    import psycopg

    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        ivy.execute("DELETE FROM mibyan.audit")  # append-only: no DELETE grant for users
    hidden = ivy.execute(
        "SELECT count(*) FROM mibyan.messages WHERE session_id = %s", (sessions["cat"],)
    )
    assert hidden.fetchone()[0] == 0


def test_audit_rows_are_the_login_roles_whatever_the_environment_says(
    pg_db: PgTestDb, classroom: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``JUPYTERHUB_USER`` claims to be bob: the rows are still ada's (the session's user,
    or ``db.user``), and the day's spending sums ada's ledger only."""
    people = classroom["people"]
    monkeypatch.setenv("JUPYTERHUB_USER", people["bob"].name)
    ada = people["ada"]
    work(pg_db, ada, "more recursion", 0.125)
    admin = pg_db.admin()
    owners = admin.execute(
        "SELECT DISTINCT user_name FROM mibyan.audit WHERE detail LIKE '%%recursion%%'"
    ).fetchall()
    assert owners == [(ada.name,)]
    store = SessionStore(pg_db.url(ada.name))
    try:
        spent = spent_since(store.db.conn, ada.name, 0.0)
        assert (spent.cost, spent.tokens) == (0.375, 240)
    finally:
        store.close()


def admin_url(pg_db: PgTestDb) -> str:
    """A hub admin's login role (a member of mibyan_admin), its password in the passfile."""
    name = pg_db.make_role("keeper", "LOGIN PASSWORD 'keeper-secret' IN ROLE mibyan_admin")
    with open(os.environ["PGPASSFILE"], "a", encoding="utf-8") as passfile:
        passfile.write(f"*:*:*:{name}:keeper-secret\n")
    return pg_db.url(name)


def test_purge_on_the_team_store_as_an_admin_role(
    pg_db: PgTestDb, classroom: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from mibyan_jupyter.admin import main

    people = classroom["people"]
    old = work(pg_db, people["ada"], "last term", 0.1, age_days=40)
    url = admin_url(pg_db)
    assert main(["purge", "--older-than", "30", "--db", url, "--dry-run"]) == 0
    assert "would delete 1 session(s), 1 audit row(s)" in capsys.readouterr().out
    admin = pg_db.admin()
    assert admin.execute("SELECT count(*) FROM mibyan.sessions").fetchone()[0] == 4
    # A student's role may not purge: one line, nothing deleted (one transaction).
    assert main(["purge", "--older-than", "30", "--db", pg_db.url(people["ada"].name)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "audit" in err
    assert admin.execute("SELECT count(*) FROM mibyan.sessions").fetchone()[0] == 4
    assert main(["purge", "--older-than", "30", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "the team store: deleted 1 session(s), 1 audit row(s) older than 30 days" in out
    assert "keeper-secret" not in out
    left = {row[0] for row in admin.execute("SELECT id FROM mibyan.sessions")}
    assert old not in left
    assert len(left) == 3
    messages = admin.execute("SELECT count(*) FROM mibyan.messages WHERE session_id = %s", (old,))
    assert messages.fetchone()[0] == 0  # gone with the session (ON DELETE CASCADE)
