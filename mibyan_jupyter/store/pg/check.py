"""What ``mibyan-admin pg check`` verifies: the conditions under which row-level security
is a guarantee and not a hope (docs/architecture.md, "Store").

Each is a way the privacy of the team store is lost without any error: a table made by a
later migration without ``FORCE ROW LEVEL SECURITY``, a table owned by a role someone logs
in as, a hub user made superuser or given BYPASSRLS to "fix" a permission error, a grant
that lets students rewrite the audit trail or the roster. Each problem is one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mibyan_jupyter.store.pg.schema import (
    ADMIN_ROLE,
    APP_ROLE,
    LATEST,
    OWNER_ROLE,
    SCHEMA,
    schema_version,
)

if TYPE_CHECKING:
    import psycopg

READ_ONLY_FOR_USERS = ("courses", "course_members", "schema_migrations")
APPEND_ONLY_FOR_USERS = ("audit",)

_TABLES = """
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname
"""

_USERS = """
WITH RECURSIVE members(oid) AS (
    SELECT m.member FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
    WHERE g.rolname = %(app)s
    UNION SELECT m.member FROM pg_auth_members m JOIN members ON m.roleid = members.oid
)
SELECT r.rolname, r.rolsuper, r.rolbypassrls, pg_has_role(r.oid, %(owner)s, 'MEMBER')
FROM pg_roles r JOIN members ON members.oid = r.oid WHERE r.rolcanlogin ORDER BY r.rolname
"""


def _role_problems(conn: psycopg.Connection[Any]) -> list[str]:
    problems = []
    for name in (OWNER_ROLE, APP_ROLE, ADMIN_ROLE):
        row = conn.execute(
            "SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s",
            (name,),
        ).fetchone()
        if row is None:
            problems.append(f"role {name} is missing: run `mibyan-admin pg migrate`")
        elif any(row):
            problems.append(f"role {name} must be NOLOGIN, not superuser, without BYPASSRLS")
    return problems


def _grant_problems(conn: psycopg.Connection[Any], tables: list[str]) -> list[str]:
    problems = []
    for table in tables:
        qualified = f"{SCHEMA}.{table}"
        denied = ["TRUNCATE", "REFERENCES", "TRIGGER"]
        if table in READ_ONLY_FOR_USERS:
            denied += ["INSERT", "UPDATE", "DELETE"]
        if table in APPEND_ONLY_FOR_USERS:
            denied += ["UPDATE", "DELETE"]
        for privilege in denied:
            row = conn.execute(
                "SELECT has_table_privilege(%s, %s, %s)", (APP_ROLE, qualified, privilege)
            ).fetchone()
            if row and row[0]:
                problems.append(f"{APP_ROLE} may {privilege} {table}: revoke it")
        public = conn.execute(
            "SELECT count(*) FROM information_schema.role_table_grants"
            " WHERE table_schema = %s AND table_name = %s AND grantee = 'PUBLIC'",
            (SCHEMA, table),
        ).fetchone()
        if public and public[0]:
            problems.append(f"PUBLIC has privileges on {table}: revoke them")
    return problems


def problems(conn: psycopg.Connection[Any]) -> tuple[list[str], str]:
    """Every problem found (one line each) and, when there are none, the summary line."""
    found = _role_problems(conn)
    version = schema_version(conn)
    if version != LATEST:
        found.append(f"schema is {version or 0}, this version's is {LATEST}: run migrate")
    tables = []
    for name, rls, forced, owner in conn.execute(_TABLES, (SCHEMA,)).fetchall():
        tables.append(str(name))
        if not rls or not forced:
            found.append(f"table {name}: row-level security is not enabled and forced")
        if owner != OWNER_ROLE:
            found.append(f"table {name} is owned by {owner}, not {OWNER_ROLE}")
    found += _grant_problems(conn, tables)
    users = conn.execute(_USERS, {"app": APP_ROLE, "owner": OWNER_ROLE}).fetchall()
    for name, superuser, bypass, owner in users:
        if superuser or bypass or owner:
            why = "a superuser" if superuser else "BYPASSRLS" if bypass else OWNER_ROLE
            found.append(f"user role {name} is {why}: row-level security does not bind it")
    summary = (
        f"ok: schema {version}; {len(tables)} tables, each with row-level security enabled "
        f"and forced and owned by {OWNER_ROLE}; {len(users)} user roles, none a superuser, "
        f"BYPASSRLS or owner; audit append-only and the roster read-only for users"
    )
    return found, summary
