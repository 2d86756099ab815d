"""The team store's schema on the real PostgreSQL: the migrations (numbered and named as the
SQLite ones, every SQLite column present), row-level security enabled and forced on every
table, ``mibyan-admin pg check`` and what it catches, full-text search with ranking, and
``mibyan-admin pg add-user``.
"""

from __future__ import annotations

import io
import tomllib
from pathlib import Path

import psycopg
import pytest
from pg_server import PgTestDb

from mibyan_jupyter import admin
from mibyan_jupyter.store.db import Database, migrations
from mibyan_jupyter.store.pg.schema import LATEST, OWNER_ROLE, migrate, pg_migrations, tables

ROOT = Path(__file__).parents[2]
SQLITE_ONLY = {"messages_fts", "fts_state", "sqlite_sequence"}
"""FTS5's table and its batch state: on PostgreSQL the tsvector column and its GIN index."""


def test_the_migrations_are_numbered_and_named_as_the_sqlite_ones() -> None:
    ours = [(number, name) for number, name, _ in pg_migrations()]
    assert ours == [(number, name) for number, name, _ in migrations()]
    assert len(ours) == LATEST


def test_every_sqlite_column_is_in_the_postgres_schema(pg_db: PgTestDb, tmp_path: Path) -> None:
    with Database(tmp_path / "s.sqlite3") as lite:
        names = [
            name
            for (name,) in lite.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not name.startswith(tuple(SQLITE_ONLY))
        ]
        expected = {
            name: {row[1] for row in lite.conn.execute(f"PRAGMA table_info({name})")}
            for name in names
        }
    admin_conn = pg_db.admin()
    found: dict[str, set[str]] = {}
    for table, column in admin_conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'mibyan'"
    ):
        found.setdefault(table, set()).add(column)
    for table, columns in expected.items():
        assert columns <= found.get(table, set()), table
    assert found["messages"] - expected["messages"] == {"tsv"}
    assert {"rowid"} <= found["sessions"] & found["tool_calls"]  # SQLite's implicit rowid


def test_migrate_twice_applies_nothing_the_second_time(pg_db: PgTestDb) -> None:
    conn = pg_db.admin()
    assert migrate(conn) == []
    rows = conn.execute("SELECT number, name FROM mibyan.schema_migrations ORDER BY number")
    assert rows.fetchall() == [(number, name) for number, name, _ in pg_migrations()]


def test_a_blank_database_migrates_with_the_admin_command(
    pg_db: PgTestDb, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"blank_{pg_db.suffix}"
    pg_db.admin().execute(f"CREATE DATABASE {name}")
    url = pg_db.cluster.url(name)
    try:
        assert admin.main(["pg", "migrate", "--db", url]) == 0
        assert admin.main(["pg", "migrate", "--db", url]) == 0
        assert admin.main(["pg", "check", "--db", url]) == 0
    finally:
        pg_db.admin().execute(f"DROP DATABASE {name} WITH (FORCE)")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"schema {LATEST}: applied {', '.join(map(str, range(1, LATEST + 1)))}"
    assert out[1] == f"schema {LATEST}: already up to date"
    assert out[2].startswith(f"ok: schema {LATEST}; 10 tables")


def test_every_table_has_row_security_enabled_and_forced_and_one_owner(pg_db: PgTestDb) -> None:
    conn = pg_db.admin()
    rows = conn.execute(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'mibyan' AND c.relkind IN ('r', 'p')"
    ).fetchall()
    assert len(rows) == len(tables(conn)) == 10
    assert all(rls and forced and owner == OWNER_ROLE for _, rls, forced, owner in rows), rows
    owner = conn.execute(
        "SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s",
        (OWNER_ROLE,),
    )
    assert owner.fetchone() == (False, False, False)


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        (
            "SET ROLE mibyan_owner; CREATE TABLE mibyan.notes (x int); RESET ROLE",
            "table notes: row-level security is not enabled and forced",
        ),
        (
            "ALTER TABLE mibyan.messages NO FORCE ROW LEVEL SECURITY",
            "table messages: row-level security is not enabled and forced",
        ),
        ("GRANT UPDATE ON mibyan.audit TO mibyan_app", "mibyan_app may UPDATE audit"),
        ("GRANT DELETE ON mibyan.audit TO mibyan_app", "mibyan_app may DELETE audit"),
        ("GRANT TRUNCATE ON mibyan.messages TO mibyan_app", "mibyan_app may TRUNCATE messages"),
        ("GRANT INSERT ON mibyan.course_members TO mibyan_app", "may INSERT course_members"),
        ("GRANT SELECT ON mibyan.sessions TO PUBLIC", "PUBLIC has privileges on sessions"),
        ("ALTER TABLE mibyan.audit OWNER TO mibyan", "table audit is owned by mibyan"),
        ("CREATE ROLE {u} LOGIN SUPERUSER IN ROLE mibyan_app", "user role {u} is a superuser"),
        ("CREATE ROLE {u} LOGIN BYPASSRLS IN ROLE mibyan_app", "user role {u} is BYPASSRLS"),
        ("CREATE ROLE {u} LOGIN IN ROLE mibyan_app, mibyan_owner", "{u} is mibyan_owner"),
        ("ALTER ROLE mibyan_owner LOGIN", "role mibyan_owner must be NOLOGIN"),
    ],
)
def test_check_names_each_way_row_security_is_lost(
    pg_db: PgTestDb, breakage: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    user = f"u_{pg_db.suffix}"
    conn = pg_db.admin()
    conn.execute(breakage.format(u=user))
    try:
        assert admin.main(["pg", "check", "--db", pg_db.url("mibyan")]) == 1
    finally:
        conn.execute("ALTER ROLE mibyan_owner NOLOGIN")
        if "{u}" in breakage:
            conn.execute(f"DROP ROLE {user}")
    out = capsys.readouterr().out
    assert problem.format(u=user) in out, out
    assert out.startswith("problem: ")
    assert "ok:" not in out


def test_a_newer_schema_is_refused_by_migrate_and_left_alone(pg_db: PgTestDb) -> None:
    conn = pg_db.admin()
    conn.execute("INSERT INTO mibyan.schema_migrations VALUES (99, 'future', 0)")
    with pytest.raises(RuntimeError, match="newer than this mibyan-jupyter knows"):
        migrate(conn)
    assert conn.execute("SELECT max(number) FROM mibyan.schema_migrations").fetchone() == (99,)


def test_search_ranks_with_ts_rank_through_the_gin_index(pg_db: PgTestDb) -> None:
    """``search_messages`` ranks with ``ts_rank``; it exists because under row-level
    security a user's own ``tsv @@ q`` may not use the GIN index (``@@`` is not leakproof):
    the plan below shows both sides."""
    alice = pg_db.user("alice")
    conn = pg_db.connect_as(alice)
    conn.execute("SET search_path = mibyan")
    conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)")
    texts = [
        "pandas pandas dataframe groupby",
        "a dataframe without the library",
        "pandas once, in passing, among many other words here",
        "nothing relevant",
    ]
    for seq, text in enumerate(texts):
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
            " VALUES ('s', %s, 'user', %s, '{}', 1)",
            (seq, text),
        )
    query = "websearch_to_tsquery('simple', 'pandas')"
    ranked = conn.execute(f"SELECT seq, rank FROM search_messages({query}, 10)").fetchall()
    assert [seq for seq, _ in ranked] == [0, 2]
    assert ranked[0][1] > ranked[1][1]
    assert conn.execute(f"SELECT seq FROM search_messages({query}, 1)").fetchall() == [(0,)]
    assert conn.execute(f"SELECT seq FROM search_messages({query}, 9, 'other')").fetchall() == []

    def plan(on: object) -> str:
        on.execute("SET enable_seqscan = off")  # type: ignore[attr-defined]
        rows = on.execute(  # type: ignore[attr-defined]
            f"EXPLAIN SELECT id FROM mibyan.messages WHERE tsv @@ {query}"
        )
        return " ".join(row[0] for row in rows)

    assert "messages_fts" not in plan(conn)  # the user's own query: a sequential scan
    owner = pg_db.admin()
    owner.execute("SET ROLE mibyan_owner")  # what search_messages runs as
    assert "Index Scan on messages_fts" in plan(owner)


def test_a_message_too_long_for_one_tsvector_is_still_stored(pg_db: PgTestDb) -> None:
    """A tsvector holds at most 1 MB; search sees the first 100,000 characters, so a huge
    tool result never fails the append (SQLite's FTS5 has no such limit)."""
    alice = pg_db.user("alice")
    conn = pg_db.connect_as(alice)
    conn.execute("SET search_path = mibyan")
    conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)")
    huge = " ".join(f"w{i:07d}x" for i in range(400_000))  # 4 MB of distinct words
    conn.execute(
        "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
        " VALUES ('s', 0, 'tool', %s, '{}', 1)",
        (huge,),
    )
    found = conn.execute(
        "SELECT length(text) FROM messages WHERE tsv @@ to_tsquery('simple', 'w0000001x')"
    )
    assert found.fetchone() == (len(huge),)


def test_add_user_makes_a_login_role_in_a_course_with_a_hashed_password(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"erin_{pg_db.suffix}"
    monkeypatch.setattr("sys.stdin", io.StringIO("Erin-Hunter2\n"))
    url = pg_db.url("mibyan")
    args = ["pg", "add-user", name, "--course", "ds101", "--role", "instructor"]
    assert admin.main([*args, "--password-stdin", "--db", url]) == 0
    assert f"user {name}: login role in mibyan_app, instructor of ds101 (new)" in (
        capsys.readouterr().out
    )
    conn = pg_db.admin()
    (stored,) = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (name,))
    assert stored[0].startswith("SCRAM-SHA-256$")
    assert "Erin-Hunter2" not in stored[0]
    roster = conn.execute(
        "SELECT course, role FROM mibyan.course_members WHERE user_name = %s", (name,)
    )
    assert roster.fetchall() == [("ds101", "instructor")]
    login = psycopg.connect(pg_db.cluster.conninfo(pg_db.name, name), password="Erin-Hunter2")
    login.close()
    assert admin.main(["pg", "add-user", name, "--course", "ds101", "--db", url]) == 0
    assert conn.execute(
        "SELECT role FROM mibyan.course_members WHERE user_name = %s", (name,)
    ).fetchall() == [("student",)]


def test_the_admin_refuses_a_url_with_a_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert admin.main(["pg", "check", "--db", "postgresql://a:Hunter2@h/db"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "holds a password" in err
    assert "Hunter2" not in err


def test_the_console_script_is_declared() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["mibyan-admin"] == "mibyan_jupyter.admin:main"


@pytest.mark.parametrize("name", ["mibyan_owner", "mibyan_app", "mibyan_admin", "pg_monitor", ""])
def test_add_user_refuses_the_store_s_own_roles(
    pg_db: PgTestDb, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert admin.main(["pg", "add-user", name, "--db", pg_db.url("mibyan")]) == 1
    assert "cannot be a user's role name" in capsys.readouterr().err
    member = pg_db.admin().execute(
        "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member"
        " JOIN pg_roles g ON g.oid = m.roleid WHERE r.rolname = %s AND g.rolname = 'mibyan_app'",
        (name,),
    )
    assert member.fetchone() == (0,)


def test_an_admin_that_is_not_a_superuser_can_run_every_command(
    pg_db: PgTestDb, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the guide says an admin needs: CREATEROLE, membership in mibyan_owner and
    mibyan_admin, and CREATE on the database (its owner here)."""
    hubadmin = pg_db.make_role(
        "hubadmin", "LOGIN CREATEROLE IN ROLE mibyan_owner, mibyan_admin PASSWORD 'Admin-pw1'"
    )
    name = f"fresh_{pg_db.suffix}"
    pg_db.admin().execute(f"CREATE DATABASE {name} OWNER {hubadmin}")
    monkeypatch.setenv("PGPASSWORD", "Admin-pw1")
    url = pg_db.cluster.url(name, hubadmin)
    student = f"fay_{pg_db.suffix}"
    pg_db.roles.append(student)
    try:
        assert admin.main(["pg", "migrate", "--db", url]) == 0
        assert admin.main(["pg", "add-user", student, "--course", "ds101", "--db", url]) == 0
        assert admin.main(["pg", "check", "--db", url]) == 0, capsys.readouterr().out
    finally:
        pg_db.admin().execute(f"DROP DATABASE {name} WITH (FORCE)")
    out = capsys.readouterr().out
    assert f"user {student}: login role in mibyan_app, student of ds101 (new)" in out
