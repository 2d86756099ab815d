"""Row-level security on the team store, tried the way a student would: hand-written SQL on
a raw psycopg connection as their own login role (no mibyan code between them and the
server), against a real PostgreSQL.

The class: alice and bob are students of ds101, carol its instructor, dave the instructor
of ml202. Each student has a session with a message, a tool call, a usage row, a kept tool
result, an audit row and an "always" rule, written by themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pg_server import PgTestDb, PgUser
from psycopg import errors

CHILD_TABLES = ("messages", "tool_calls", "usage_ledger", "tool_results")
SETTERS = {
    "sessions": "title = 'changed'",
    "messages": "text = 'changed'",
    "tool_calls": "status = 'done'",
    "usage_ledger": "cost = 99",
    "tool_results": "content = 'changed'",
}


@dataclass
class Classroom:
    db: PgTestDb
    alice: PgUser
    bob: PgUser
    carol: PgUser
    dave: PgUser

    connections: dict[str, Any] = field(default_factory=dict)

    def sql(self, user: PgUser) -> Any:
        """``user``'s own connection (one per user), search_path at the mibyan schema."""
        if user.name not in self.connections:
            conn = self.db.connect_as(user)
            conn.execute("SET search_path = mibyan")
            self.connections[user.name] = conn
        return self.connections[user.name]


def _write_own_rows(conn: Any, session: str) -> None:
    """What a student's kernel writes, as plain SQL (user_name comes from the login role)."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (%s, %s, 1, 1)",
            (session, f"title of {session}"),
        )
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
            " VALUES (%s, 0, 'user', %s, '{}', 1)",
            (session, f"secret homework of {session}"),
        )
        conn.execute(
            "INSERT INTO tool_calls (session_id, call_id, name, started_at)"
            " VALUES (%s, 'c1', 'run_python', 1)",
            (session,),
        )
        conn.execute("INSERT INTO usage_ledger (session_id, created_at) VALUES (%s, 1)", (session,))
        conn.execute(
            "INSERT INTO tool_results (session_id, result_id, call_id, tool_name, content,"
            " chars, created_at) VALUES (%s, %s, 'c1', 'run_python', 'out', 3, 1)",
            (session, f"r-{session}"),
        )
        conn.execute(
            "INSERT INTO audit (at, session_id, kind) VALUES (1, %s, 'approval')", (session,)
        )
        conn.execute(
            "INSERT INTO approval_rules (tool, approved, created_at) VALUES ('shell', 1, 1)"
        )


def _classroom(db: PgTestDb) -> Classroom:
    room = Classroom(
        db,
        alice=db.user("alice", "ds101"),
        bob=db.user("bob", "ds101"),
        carol=db.user("carol", "ds101", role="instructor"),
        dave=db.user("dave", "ml202", role="instructor"),
    )
    _write_own_rows(room.sql(room.alice), "s-alice")
    _write_own_rows(room.sql(room.bob), "s-bob")
    return room


@pytest.fixture(scope="module")
def shared_room(pg_module_db: PgTestDb) -> Classroom:
    """The class, for tests that change nothing when row-level security holds (~0.3 s
    saved per test): a test that did change something would fail the others too."""
    return _classroom(pg_module_db)


@pytest.fixture
def room(pg_db: PgTestDb) -> Classroom:
    """The class in a database of this test's own, for tests that write."""
    return _classroom(pg_db)


def _sessions_seen(conn: Any, table: str) -> set[str]:
    column = "id" if table == "sessions" else "session_id"
    return {row[0] for row in conn.execute(f"SELECT {column} FROM {table}")}


@pytest.mark.parametrize("table", ["sessions", *CHILD_TABLES, "audit"])
def test_a_student_reads_only_their_own_rows(shared_room: Classroom, table: str) -> None:
    alice = shared_room.sql(shared_room.alice)
    assert _sessions_seen(alice, table) == {"s-alice"}
    column = "id" if table == "sessions" else "session_id"
    assert alice.execute(f"SELECT * FROM {table} WHERE {column} = 's-bob'").fetchall() == []
    assert alice.execute("SELECT count(*) FROM approval_rules").fetchone() == (1,)
    found = alice.execute("SELECT text FROM messages WHERE tsv @@ to_tsquery('simple', 'homework')")
    assert [text for (text,) in found] == ["secret homework of s-alice"]


@pytest.mark.parametrize("table", ["sessions", *CHILD_TABLES])
def test_a_student_changes_and_deletes_nothing_of_another(room: Classroom, table: str) -> None:
    alice = room.sql(room.alice)
    column = "id" if table == "sessions" else "session_id"
    setter = SETTERS[table]
    assert alice.execute(f"UPDATE {table} SET {setter} WHERE {column} = 's-bob'").rowcount == 0
    assert alice.execute(f"DELETE FROM {table} WHERE {column} = 's-bob'").rowcount == 0
    assert alice.execute(f"DELETE FROM {table} WHERE true").rowcount >= 1  # her own go
    assert _sessions_seen(room.sql(room.bob), table) == {"s-bob"}  # bob's are all there


def test_a_student_cannot_write_as_another_or_into_their_session(shared_room: Classroom) -> None:
    alice = shared_room.sql(shared_room.alice)
    attempts = [
        "INSERT INTO messages (session_id, seq, role, data, created_at)"
        " VALUES ('s-bob', 7, 'user', '{}', 1)",
        "INSERT INTO sessions (id, user_name, created_at, updated_at) VALUES ('x', %s, 1, 1)",
        "UPDATE sessions SET user_name = %s WHERE id = 's-alice'",
        "INSERT INTO audit (at, user_name, kind) VALUES (1, %s, 'approval')",
        "INSERT INTO approval_rules (user_name, tool, approved, created_at) VALUES (%s, 'x', 1, 1)",
        "INSERT INTO tool_results (session_id, result_id, call_id, tool_name, content, chars,"
        " created_at) VALUES ('s-bob', 'r9', 'c', 't', 'x', 1, 1)",
    ]
    for statement in attempts:
        params = (shared_room.bob.name,) if "%s" in statement else None
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            alice.execute(statement, params)
    bob = shared_room.sql(shared_room.bob)
    assert bob.execute("SELECT count(*) FROM messages").fetchone() == (1,)


def test_the_login_role_not_the_environment_says_whose_a_row_is(
    room: Classroom, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", room.bob.name)
    monkeypatch.setenv("USER", room.bob.name)
    alice = room.sql(room.alice)
    alice.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s2', 1, 1)")
    assert alice.execute("SELECT user_name FROM sessions WHERE id = 's2'").fetchone() == (
        room.alice.name,
    )


@pytest.mark.parametrize("table", ["sessions", *CHILD_TABLES, "audit"])
def test_the_instructor_reads_the_course_students_rows_and_writes_none(
    shared_room: Classroom, table: str
) -> None:
    carol = shared_room.sql(shared_room.carol)
    assert _sessions_seen(carol, table) == {"s-alice", "s-bob"}
    column = "id" if table == "sessions" else "session_id"
    if table == "audit":
        with pytest.raises(errors.InsufficientPrivilege):
            carol.execute("DELETE FROM audit")
        return
    setter = SETTERS[table]
    assert carol.execute(f"UPDATE {table} SET {setter} WHERE {column} = 's-bob'").rowcount == 0
    assert carol.execute(f"DELETE FROM {table} WHERE true").rowcount == 0
    assert _sessions_seen(shared_room.sql(shared_room.bob), table) == {"s-bob"}


@pytest.mark.parametrize("table", ["sessions", *CHILD_TABLES, "audit", "approval_rules"])
def test_an_instructor_of_another_course_reads_nothing(shared_room: Classroom, table: str) -> None:
    dave = shared_room.sql(shared_room.dave)
    assert dave.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


def test_the_instructor_does_not_read_the_students_approval_rules(shared_room: Classroom) -> None:
    assert shared_room.sql(shared_room.carol).execute(
        "SELECT count(*) FROM approval_rules"
    ).fetchone() == (0,)


def test_search_finds_what_the_policies_let_one_read(shared_room: Classroom) -> None:
    query = "SELECT session_id FROM search_messages(to_tsquery('simple', 'homework'), 10)"
    seen = {
        user.name: sorted(sid for (sid,) in shared_room.sql(user).execute(query))
        for user in (shared_room.alice, shared_room.carol, shared_room.dave)
    }
    assert seen == {
        shared_room.alice.name: ["s-alice"],
        shared_room.carol.name: ["s-alice", "s-bob"],
        shared_room.dave.name: [],
    }


def test_the_roster_shows_a_student_only_themselves(shared_room: Classroom) -> None:
    alice = shared_room.sql(shared_room.alice)
    members = alice.execute("SELECT user_name, role FROM course_members").fetchall()
    assert members == [(shared_room.alice.name, "student")]
    carol = shared_room.sql(shared_room.carol)
    seen = {name for (name,) in carol.execute("SELECT user_name FROM course_members")}
    assert seen == {shared_room.alice.name, shared_room.bob.name, shared_room.carol.name}


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO courses (name) VALUES ('mine')",
        "INSERT INTO course_members (course, user_name, role) VALUES ('ds101', '{me}', 'instructor')",
        "UPDATE course_members SET role = 'instructor' WHERE user_name = '{me}'",
        "DELETE FROM course_members",
        "DELETE FROM courses",
        "UPDATE audit SET detail = '{{}}'",
        "DELETE FROM audit",
        "TRUNCATE audit",
        "TRUNCATE messages",
        "INSERT INTO schema_migrations (number, name, applied_at) VALUES (99, 'x', 1)",
        "ALTER TABLE sessions DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE messages NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE course_members ADD COLUMN x int",
        "DROP POLICY own ON sessions",
        "CREATE POLICY mine ON sessions FOR SELECT USING (true)",
        "ALTER POLICY review ON sessions USING (true)",
        "CREATE TABLE mibyan.sneaky (x int)",
        "CREATE OR REPLACE FUNCTION mibyan.instructs(a text, b text) RETURNS boolean"
        " LANGUAGE sql AS 'SELECT true'",
        "SET ROLE mibyan_owner",
        "SET ROLE mibyan_admin",
        "GRANT mibyan_admin TO {me}",
        "DROP TABLE audit",
    ],
)
def test_a_student_cannot_change_the_roster_the_policies_or_the_audit_trail(
    shared_room: Classroom, statement: str
) -> None:
    alice = shared_room.sql(shared_room.alice)
    with pytest.raises(errors.InsufficientPrivilege):
        alice.execute(statement.format(me=shared_room.alice.name))
    admin = shared_room.db.admin()
    assert admin.execute("SELECT count(*) FROM mibyan.audit").fetchone() == (2,)
    assert admin.execute("SELECT count(*) FROM mibyan.course_members").fetchone() == (4,)


def test_the_audit_trail_is_append_only_for_students(room: Classroom) -> None:
    alice = room.sql(room.alice)
    alice.execute("INSERT INTO audit (at, kind, detail) VALUES (2, 'cap_hit', '{\"limit\": 1}')")
    assert alice.execute("SELECT count(*) FROM audit").fetchone() == (2,)
    for statement in ("UPDATE audit SET kind = 'approval'", "DELETE FROM audit"):
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied"):
            alice.execute(statement)
    carol = room.sql(room.carol)
    assert carol.execute("SELECT count(*) FROM audit").fetchone() == (3,)
