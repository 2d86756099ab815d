"""What users spent, for the admin policy's daily caps and the instructor's review; and
the retention purge.

A day is a UTC day: the cap resets at 00:00 UTC, one moment for every student of a hub
whatever their browser's time zone (docs/architecture.md, "Admin policy"). Usage is the
``usage_ledger`` of the user's sessions (every attempt's tokens and cost as the provider
reported them, the same numbers the budget gate settles with).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mibyan_jupyter.store.conn import Conn, StoreDatabase

DAY_S = 86_400.0


def day_start(now: float | None = None) -> float:
    """00:00 UTC of the day ``now`` falls in (epoch seconds)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_reset(now: float | None = None) -> float:
    return day_start(now) + DAY_S


def reset_text(now: float | None = None) -> str:
    """``00:00 UTC (in 3 h 12 min)``: when a daily cap resets, for the student's one line."""
    current = time.time() if now is None else now
    left = timedelta(seconds=int(next_reset(current) - current))
    hours, rest = divmod(left.seconds, 3600)
    return f"00:00 UTC (in {hours} h {rest // 60} min)"


@dataclass(frozen=True, slots=True)
class Spent:
    cost: float
    tokens: int


def spent_since(conn: Conn, user: str, since: float) -> Spent:
    """The cost and tokens (input + output) ``user``'s sessions were billed since ``since``."""
    row = conn.execute(
        "SELECT coalesce(sum(u.cost), 0), coalesce(sum(u.input_tokens + u.output_tokens), 0)"
        " FROM usage_ledger u JOIN sessions s ON s.id = u.session_id"
        " WHERE s.user_name = ? AND u.created_at >= ?",
        (user, since),
    ).fetchone()
    return Spent(float(row[0]), int(row[1]))


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One session in the instructor's table."""

    user_name: str
    session_id: str
    title: str
    model: str | None
    notebook_path: str | None
    created_at: float
    updated_at: float
    messages: int
    tokens: int
    cost: float | None


def review_rows(
    db: StoreDatabase,
    users: Sequence[str],
    *,
    since: float | None = None,
    search: str | None = None,
    limit: int = 200,
) -> list[ReviewRow]:
    """The sessions of ``users`` (newest first) with their usage; ``search``: only those
    with a message containing the text (case-insensitive substring, so no FTS catch-up)."""
    if not users:
        return []
    params: list[object] = list(users)
    where = f"s.user_name IN ({','.join('?' * len(users))})"
    if since is not None:
        where += " AND s.updated_at >= ?"
        params.append(since)
    if search:
        found = db.dialect.contains("lower(m.text)", "lower(?)")
        where += f" AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND {found})"
        params.append(search)
    query = (
        "SELECT s.user_name, s.id, s.title, s.model, s.notebook_path, s.created_at, s.updated_at,"
        " (SELECT count(*) FROM messages m WHERE m.session_id = s.id),"
        " (SELECT coalesce(sum(u.input_tokens + u.output_tokens), 0) FROM usage_ledger u"
        "  WHERE u.session_id = s.id),"
        " (SELECT sum(u.cost) FROM usage_ledger u WHERE u.session_id = s.id)"
        f" FROM sessions s WHERE {where} ORDER BY s.updated_at DESC LIMIT ?"
    )
    return [ReviewRow(*row) for row in db.conn.execute(query, [*params, limit])]


def purge_older_than(db: StoreDatabase, days: int, *, now: float | None = None) -> tuple[int, int]:
    """Delete sessions not updated for ``days`` days (their messages, tool calls, results
    and usage go with them by ``ON DELETE CASCADE``) and audit rows older than that, in one
    transaction; returns (sessions, audit rows) deleted."""
    cutoff = (time.time() if now is None else now) - days * DAY_S
    with db.transaction() as conn:
        sessions = conn.execute("DELETE FROM sessions WHERE updated_at < ?", (cutoff,)).rowcount
        audit = conn.execute("DELETE FROM audit WHERE at < ?", (cutoff,)).rowcount
    return sessions, audit
