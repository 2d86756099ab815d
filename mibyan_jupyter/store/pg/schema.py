"""The team store's schema on PostgreSQL: its roles, its numbered migrations, applying them.

Why migrations are applied here and never by a kernel: the hub user's role (a member of
``mibyan_app``) can create nothing, by design. Only an admin (a superuser, or a role that
may create roles and is a member of ``mibyan_owner``) runs :func:`migrate`, through
``mibyan-admin pg migrate``; a kernel finding an older schema says to run it
(docs/architecture.md, "Store").

The files are ``mibyan_jupyter/store/migrations/pg/NNNN_name.sql``, numbered and named as
the SQLite ones (the same number means the same schema on both; the PG files say where the
dialects differ). Each is applied in its own transaction as the owner role, under an
advisory lock, so two admins migrating at once do not race; ``schema_migrations`` records
each number.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mibyan_jupyter.store.files import numbered_migrations

if TYPE_CHECKING:
    import psycopg

SCHEMA = "mibyan"
OWNER_ROLE = "mibyan_owner"
APP_ROLE = "mibyan_app"
ADMIN_ROLE = "mibyan_admin"
ROLES = (OWNER_ROLE, APP_ROLE, ADMIN_ROLE)
_LOCK_KEY = 0x6D696279  # "miby": the advisory lock of a migration, per database


def pg_migrations() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every bundled PostgreSQL migration, in order."""
    return numbered_migrations("pg")


LATEST = len(pg_migrations())

_BOOTSTRAP_ROLES = """
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['mibyan_owner', 'mibyan_app', 'mibyan_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
                -- An admin that is not a superuser (CREATEROLE) runs the migrations as
                -- the owner and keeps the roster as an admin: it joins the two it made.
                IF r <> 'mibyan_app' AND NOT (SELECT rolsuper FROM pg_roles
                                              WHERE rolname = current_user) THEN
                    EXECUTE format('GRANT %I TO %I', r, current_user);
                END IF;
            EXCEPTION WHEN duplicate_object THEN NULL;  -- another database's migrate won
            END;
        END IF;
    END LOOP;
END
$$
"""

_BOOTSTRAP_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    number     integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at double precision NOT NULL
);
ALTER TABLE schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE schema_migrations FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS owner_all ON schema_migrations;
CREATE POLICY owner_all ON schema_migrations TO mibyan_owner USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS read ON schema_migrations;
CREATE POLICY read ON schema_migrations FOR SELECT TO mibyan_app, mibyan_admin USING (true);
GRANT USAGE ON SCHEMA mibyan TO mibyan_app, mibyan_admin;
GRANT SELECT ON schema_migrations TO mibyan_app, mibyan_admin;
"""


def schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> int | None:
    """The newest migration applied, ``0`` before any, ``None`` without the mibyan schema
    (or when this role may not read it)."""
    row = conn.execute(
        "SELECT to_regclass('mibyan.schema_migrations') IS NOT NULL"
        " AND has_table_privilege('mibyan.schema_migrations', 'SELECT')"
    ).fetchone()
    if not row or not row[0]:
        return None
    found = conn.execute("SELECT coalesce(max(number), 0) FROM mibyan.schema_migrations")
    (version,) = found.fetchone() or (0,)
    return int(str(version))


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Bring the database to :data:`LATEST`; returns the numbers applied (``[]``: it was
    up to date). ``conn`` is an admin's, in autocommit mode. A database made by a newer
    version is refused untouched."""
    with conn.transaction():
        conn.execute(_BOOTSTRAP_ROLES)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION {OWNER_ROLE}")
    applied: list[int] = []
    for number, name, sql in pg_migrations():
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
            conn.execute(f"SET LOCAL search_path = {SCHEMA}, pg_catalog")
            conn.execute(_BOOTSTRAP_TABLE)
            current = schema_version(conn) or 0
            if current > LATEST:
                raise RuntimeError(
                    f"this database has schema {current}, newer than this mibyan-jupyter "
                    f"knows ({LATEST}); upgrade the package. Nothing was changed."
                )
            if number <= current:
                continue
            conn.execute(sql.encode())
            conn.execute(
                "INSERT INTO schema_migrations (number, name, applied_at) VALUES (%s, %s, %s)",
                (number, name, time.time()),
            )
            applied.append(number)
    return applied


def tables(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Every table of the mibyan schema, by name."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname",
        (SCHEMA,),
    ).fetchall()
    return [str(name) for (name,) in rows]
