"""Whose a session is, and the audit trail (migration ``0006_users_audit.sql``).

Every session belongs to a user: ``JUPYTERHUB_USER``, else the OS user. On SQLite this is
the environment's word, so it is a convenience for listings and review, not a guarantee
(docs/architecture.md, "Admin policy": the hard guarantee is PostgreSQL's login role). A
session is tagged when it is inserted by a per-connection TEMP trigger
(:func:`tag_new_sessions`), so every path that makes a session (a new one, a fork, a
compression or delegation child) is covered by one statement and no insert needed changing.

The audit table is append-only by a trigger; rows are written in the transaction of the
event they record where there is one (an approval's), else in their own.
"""

from __future__ import annotations

import getpass
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.store.conn import Conn

AuditKind = Literal["approval", "policy_denial", "cap_hit", "exam_refusal", "policy_change"]
USER_ENV = "JUPYTERHUB_USER"


def current_user() -> str:
    """The user sessions and audit rows are recorded for."""
    hub = os.environ.get(USER_ENV, "").strip()
    if hub:
        return hub
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a uid without a passwd entry (some containers)
        return f"uid-{os.getuid()}"


def owns_file(path: Path) -> bool:
    """Whether this process's user owns ``path``: the owner of a database file sees its
    sessions from before schema 6 (``user_name`` NULL)."""
    try:
        return path.stat().st_uid == os.getuid()
    except OSError:
        return True  # a file not made yet is the user's own


def tag_new_sessions(conn: Conn, user: str | None = None) -> None:
    """Give every session this connection inserts without a user the current one.

    SQLite only (a TEMP trigger; store/db.py calls it): on PostgreSQL the column's
    ``DEFAULT current_user`` is the login role, which RLS checks (docs/architecture.md,
    "The team store (PostgreSQL)")."""
    name = (user or current_user()).replace("'", "''")
    conn.execute(
        "CREATE TEMP TRIGGER IF NOT EXISTS mibyan_session_user AFTER INSERT ON main.sessions"
        f" WHEN new.user_name IS NULL BEGIN UPDATE sessions SET user_name = '{name}'"
        " WHERE id = new.id; END"
    )


def record(
    conn: Conn,
    kind: AuditKind,
    detail: Mapping[str, Any],
    *,
    session_id: str | None = None,
    user: str | None = None,
) -> None:
    """Append one audit row in the caller's transaction (``detail`` redacted).

    Whose row: ``user`` (the caller passes ``db.user``: the login role on PostgreSQL,
    whose RLS checks ``user_name = current_user``), else the session's own user (an
    approval, written by the store writer in the session's transaction), else the
    environment's user (a SQLite session from before schema 6)."""
    text = REDACT(json.dumps(dict(detail), sort_keys=True, default=str))
    conn.execute(
        "INSERT INTO audit (at, user_name, session_id, kind, detail) SELECT ?,"
        " coalesce(?, (SELECT user_name FROM sessions WHERE id = ?), ?), ?, ?, ?",
        (time.time(), user, session_id, current_user(), session_id, kind, text),
    )


@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int
    at: float
    user_name: str
    session_id: str | None
    kind: str
    detail: dict[str, Any]


def rows(
    conn: Conn,
    *,
    users: list[str] | None = None,
    kind: str | None = None,
    since: float | None = None,
    limit: int = 500,
) -> list[AuditRow]:
    """Audit rows, newest first, of ``users`` (``None``: everyone's in the file)."""
    clauses: list[str] = []
    params: list[object] = []
    if users is not None:
        clauses.append(f"user_name IN ({','.join('?' * len(users))})")
        params += users
    if kind is not None:
        clauses.append("kind = ?")
        params.append(kind)
    if since is not None:
        clauses.append("at >= ?")
        params.append(since)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    query = f"SELECT id, at, user_name, session_id, kind, detail FROM audit{where}"
    found = conn.execute(query + " ORDER BY id DESC LIMIT ?", [*params, limit]).fetchall()
    return [AuditRow(row[0], row[1], row[2], row[3], row[4], json.loads(row[5])) for row in found]


def last_policy_digest(conn: Conn) -> str | None:
    """The admin policy's digest as last recorded (``None``: never recorded here)."""
    row = conn.execute(
        "SELECT detail FROM audit WHERE kind = 'policy_change' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else str(json.loads(row[0]).get("digest", ""))


def session_user(conn: Conn, session_id: str) -> str | None:
    """The user a session belongs to (``None``: from before schema 6, or no such session)."""
    row = conn.execute("SELECT user_name FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else row[0]
