"""``mibyan-admin``: what the people who run a hub do that a kernel must never be able to.

Why a command of its own: on the PostgreSQL team store a hub user's role can create
nothing and write no roster (docs/architecture.md, "Store"), so the schema, the roles and
the roster are changed here, by an admin's own connection (a superuser, or a role that may
create roles and is a member of ``mibyan_owner`` and ``mibyan_admin``):

    mibyan-admin pg migrate [--db URL]
    mibyan-admin pg add-user NAME [--course C --role student|instructor] [--password-stdin]
    mibyan-admin pg check [--db URL]
    mibyan-admin pg sync-roster [--db URL] [--dry-run]   (the roster from the admin policy)
    mibyan-admin purge --older-than DAYS [--db PATH|URL] [--dry-run]   (retention: policy/admin_cli.py)

``--db`` defaults to ``MIBYAN_DB_URL``. The URL never holds a password (the same rule as the
kernel's: PGPASSWORD, ~/.pgpass or PGSERVICE); a new user's password is read from stdin,
never from the command line (where ``ps`` shows it), and sent to the server already hashed
(SCRAM), so it appears in no server log either. Every failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from mibyan_jupyter.policy.admin_cli import add_purge, run_purge
from mibyan_jupyter.store.files import StoreError
from mibyan_jupyter.store.pg.connect import ENV_URL, database_url, parse_url
from mibyan_jupyter.store.pg.schema import APP_ROLE, LATEST, ROLES, SCHEMA, migrate
from mibyan_jupyter.store.pg.scrub import scrub


def build_parser() -> argparse.ArgumentParser:
    """The parser: ``pg`` here, ``purge`` from :mod:`mibyan_jupyter.policy.admin_cli`."""
    parser = argparse.ArgumentParser(prog="mibyan-admin", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pg = commands.add_parser("pg", help="the PostgreSQL team store")
    actions = pg.add_subparsers(dest="action", required=True)
    for name, text in (
        ("migrate", "make the roles and schema, apply the migrations (as an admin)"),
        ("check", "verify row-level security, ownership and grants"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("--db", help=f"database URL (default ${ENV_URL}); no password")
    add = actions.add_parser("add-user", help="a hub user's login role, in a course")
    add.add_argument("name", help="the hub user name (the login role's name)")
    add.add_argument("--course", help="add to this course's roster (made when missing)")
    add.add_argument("--role", choices=("student", "instructor"), default="student")
    add.add_argument("--password-stdin", action="store_true", help="read a password from stdin")
    add.add_argument("--db", help=f"database URL (default ${ENV_URL}); no password")
    sync = actions.add_parser("sync-roster", help="the courses' roster from the admin policy")
    sync.add_argument(
        "--dry-run", action="store_true", help="say what would change, change nothing"
    )
    sync.add_argument("--db", help=f"database URL (default ${ENV_URL}); no password")
    add_purge(commands)  # retention (mibyan_jupyter/policy/admin_cli.py)
    return parser


def _connect(url: str | None) -> Any:
    import psycopg

    chosen = database_url(url)
    if not chosen:
        raise StoreError(f"no database: give --db URL or set {ENV_URL}")
    parse_url(chosen)
    message = ""
    try:
        return psycopg.connect(chosen, autocommit=True)
    except psycopg.Error as error:
        message = scrub(str(error).strip().splitlines()[0] if str(error).strip() else "")
    raise StoreError(f"cannot connect: {message}")


def add_user(conn: Any, name: str, *, course: str | None, role: str, password: str | None) -> str:
    """Create (or update) ``name``'s LOGIN role in ``mibyan_app`` and its roster row."""
    from psycopg import sql

    if name in ROLES or name.startswith("pg_") or not 0 < len(name) <= 63:
        raise StoreError(f"{name!r} cannot be a user's role name")
    ident = sql.Identifier(name)
    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(APP_ROLE), ident))
        if password is not None:
            hashed = conn.pgconn.encrypt_password(
                password.encode(), name.encode(), b"scram-sha-256"
            )
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(ident, sql.Literal(hashed.decode()))
            )
        if course:
            conn.execute(
                f"INSERT INTO {SCHEMA}.courses (name) VALUES (%s) ON CONFLICT DO NOTHING",
                (course,),
            )
            conn.execute(
                f"INSERT INTO {SCHEMA}.course_members (course, user_name, role)"
                " VALUES (%s, %s, %s) ON CONFLICT (course, user_name) DO UPDATE SET role = %s",
                (course, name, role, role),
            )
    where = f", {role} of {course}" if course else ""
    return f"user {name}: login role in {APP_ROLE}{where}" + (" (new)" if not exists else "")


def policy_roster() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The admin policy's courses (the files the kernels obey, trusted only when root's);
    a policy that cannot be trusted or read is refused, never synced from."""
    from mibyan_jupyter.policy.files import load_policy

    loaded = load_policy()
    if loaded.problems:
        raise StoreError(f"the admin policy cannot be used: {loaded.problems[0]}")
    if loaded.policy is None:
        raise StoreError("there is no admin policy file: the roster comes from its [courses]")
    return {name: (c.instructors, c.students) for name, c in loaded.policy.courses.items()}


def _run(args: argparse.Namespace) -> int:
    from mibyan_jupyter.store.pg.check import problems
    from mibyan_jupyter.store.pg.roster import sync_roster

    with _connect(args.db) as conn:
        if args.action == "migrate":
            applied = migrate(conn)
            done = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
            print(f"schema {LATEST}: {done}")
            return 0
        if args.action == "sync-roster":
            for line in sync_roster(conn, policy_roster(), dry_run=args.dry_run):
                print(line)
            return 0
        if args.action == "add-user":
            password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
            print(add_user(conn, args.name, course=args.course, role=args.role, password=password))
            return 0
        found, summary = problems(conn)
        for line in found:
            print(f"problem: {line}")
        if not found:
            print(summary)
        return 1 if found else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "purge":
            print(run_purge(args, connect=_connect))  # the team store: the admin's own role
            return 0
        return _run(args)
    except (StoreError, ValueError) as error:
        print(f"mibyan-admin: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"mibyan-admin: {scrub(first)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
