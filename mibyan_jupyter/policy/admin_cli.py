"""``mibyan-admin purge``: retention, run by an admin (cron, a hub service), never by a kernel.

Sessions not updated for N days are deleted with everything that hangs off them (messages,
tool calls, results, usage), and audit rows older than N days with them. N is
``--older-than``, else the admin policy's ``[review] retention_days``. ``--dry-run`` counts
and deletes nothing. On SQLite it purges one database file (``--db``, default the store's
default path); a hub's students each have their own file, so a hub runs it per file, or
uses the PostgreSQL store: ``--db postgresql://admin@host/db`` (or ``MIBYAN_DB_URL``) as an
admin role, every user's old sessions at once (docs/architecture.md, "Admin policy").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mibyan_jupyter.store.usage import DAY_S


def add_purge(commands: Any) -> None:
    """The ``purge`` subcommand, on ``mibyan-admin``'s subparsers."""
    purge = commands.add_parser("purge", help="delete sessions older than the retention")
    purge.add_argument("--older-than", type=int, metavar="DAYS", help="default: the policy's")
    purge.add_argument(
        "--db",
        help="a SQLite file or the team store's URL (default: MIBYAN_DB_URL, else the store's)",
    )
    purge.add_argument("--dry-run", action="store_true", help="count, delete nothing")


def _days(args: argparse.Namespace) -> int:
    from mibyan_jupyter.policy.files import load_policy

    if args.older_than is not None:
        if args.older_than < 1:
            raise ValueError(f"--older-than must be at least 1 day; got {args.older_than}")
        return int(args.older_than)
    loaded = load_policy()
    days = loaded.policy.review.retention_days if loaded.policy is not None else None
    if days is None:
        raise ValueError("give --older-than DAYS (the admin policy sets no retention_days)")
    return days


def run_purge(args: argparse.Namespace, connect: Callable[[str], Any] | None = None) -> str:
    """Purge (or count, ``--dry-run``) and say what in one line. ``--db`` a URL (or no
    ``--db`` and ``MIBYAN_DB_URL`` set): the team store, through ``connect`` (the admin's
    own connection, as for ``mibyan-admin pg``), else a SQLite file."""
    from mibyan_jupyter.store.backend import is_team_store
    from mibyan_jupyter.store.db import Database, default_path
    from mibyan_jupyter.store.files import database_url
    from mibyan_jupyter.store.usage import purge_older_than

    days = _days(args)
    url = args.db if is_team_store(args.db) else None if args.db else database_url()
    if url and connect is not None:
        return _purge_team_store(connect(url), days, args.dry_run)
    path = Path(args.db).expanduser() if args.db else default_path()
    if not path.exists():
        raise ValueError(f"no session database at {path}")
    with Database(path) as db:
        if args.dry_run:
            cutoff = time.time() - days * DAY_S
            conn = db.conn
            sessions = conn.execute("SELECT count(*) FROM sessions WHERE updated_at < ?", (cutoff,))
            rows = conn.execute("SELECT count(*) FROM audit WHERE at < ?", (cutoff,))
            counted = (sessions.fetchone()[0], rows.fetchone()[0])
            return f"{path}: would delete {counted[0]} session(s), {counted[1]} audit row(s) older than {days} days"
        gone = purge_older_than(db, days)
    return f"{path}: deleted {gone[0]} session(s), {gone[1]} audit row(s) older than {days} days"


def _purge_team_store(conn: Any, days: int, dry_run: bool) -> str:
    """The purge on PostgreSQL, as an admin role (a member of ``mibyan_admin``, whose
    policies see every row and whose grants allow DELETE on sessions and audit: migration
    0006), in one transaction; the store's own connect refuses such a role, so this is the
    admin's plain connection (docs/architecture.md, "Admin policy")."""
    from mibyan_jupyter.store.pg.schema import SCHEMA

    cutoff = time.time() - days * DAY_S
    verb = "would delete" if dry_run else "deleted"
    with conn, conn.transaction():
        if dry_run:
            found = conn.execute(
                f"SELECT (SELECT count(*) FROM {SCHEMA}.sessions WHERE updated_at < %s),"
                f" (SELECT count(*) FROM {SCHEMA}.audit WHERE at < %s)",
                (cutoff, cutoff),
            ).fetchone()
            counted = (int(found[0]), int(found[1]))
        else:
            sessions = conn.execute(
                f"DELETE FROM {SCHEMA}.sessions WHERE updated_at < %s", (cutoff,)
            )
            audit = conn.execute(f"DELETE FROM {SCHEMA}.audit WHERE at < %s", (cutoff,))
            counted = (sessions.rowcount, audit.rowcount)
    where = "the team store"
    return (
        f"{where}: {verb} {counted[0]} session(s), {counted[1]} audit row(s) older than {days} days"
    )
