"""Reading sessions: the :class:`SessionInfo` row, finding one by id or prefix, filtering,
and following compression children. Plain reads, no writes and no liveness sweep.

Why apart from :class:`~.sessions.SessionStore`: the store's public reads each sweep for dead
owners once and then compose these; a read made of several lookups (``resolve``: the last
session, then its newest compression descendant) must not sweep again at every step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, get_args

from mibyan_jupyter.core.config import ToolExecutionMode
from mibyan_jupyter.core.stream import ThinkingLevel
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.scope import EVERYONE, UserScope

MIN_PREFIX = 6
SortKey = Literal["updated", "created", "title"]
SORT_COLUMNS: dict[str, str] = {
    "updated": "s.updated_at",
    "created": "s.created_at",
    "title": "s.title",
}


class SessionNotFoundError(StoreError):
    """No session has this id (or unique id prefix)."""


class AmbiguousSessionError(StoreError):
    """An id prefix matches several sessions; the message lists them."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session row with its message count and cost (``None``: no known price)."""

    id: str
    title: str
    model: str | None
    api_mode: str | None
    notebook_path: str | None
    status: str
    parent_id: str | None
    link_kind: str | None
    fork_at: int | None
    created_at: float
    updated_at: float
    ended_at: float | None
    end_reason: str | None
    message_count: int
    cost: float | None
    config: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def settings(self) -> SessionSettings:
        """The model and settings this session records (what a resume continues with)."""
        return SessionSettings.of(self.model, self.config)


SETTING_KEYS = (
    "system_prompt",
    "tools",
    "thinking",
    "tool_mode",
    "max_turns",
    "max_tokens",
    "max_cost",
)
"""The settings a session records in its config, so a resume continues as it was."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What a session was running with, as recorded in its ``config`` (``None``: not
    recorded, e.g. by an older version; the caller's default then applies). A resume
    continues with these unless the caller overrides them (docs/architecture.md, "One
    `%%agent` cell, end to end")."""

    model: str | None = None
    system_prompt: str | None = None
    tools: str | None = None
    """Tool groups, as ``%%agent --tools`` spells them."""
    thinking: str | None = None
    tool_mode: str | None = None
    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    pins: tuple[str, ...] | None = None
    """Pinned instructions (``%agent pin``), in order; the prompt builder's pins layer."""

    @classmethod
    def of(cls, model: str | None, config: dict[str, Any]) -> SessionSettings:
        """The settings of a session row; a value of the wrong type counts as unrecorded
        (a config edited by hand must not break the resume)."""
        allowed = {"thinking": get_args(ThinkingLevel), "tool_mode": get_args(ToolExecutionMode)}
        values: dict[str, Any] = {}
        for key in ("system_prompt", "tools", "thinking", "tool_mode"):
            text = config.get(key)
            if isinstance(text, str) and (key not in allowed or text in allowed[key]):
                values[key] = text
        for key in ("max_turns", "max_tokens", "max_cost"):
            number = config.get(key)
            if isinstance(number, bool) or not isinstance(number, int | float) or number <= 0:
                continue
            if key == "max_cost":
                values[key] = float(number)
            elif isinstance(number, int):
                values[key] = number
        pins = config.get("pins")
        if isinstance(pins, list) and all(isinstance(pin, str) for pin in pins):
            values["pins"] = tuple(pins)
        return cls(model=model or None, **values)

    def config(self) -> dict[str, Any]:
        """The recorded settings as config entries (unrecorded ones left out)."""
        entries = {k: getattr(self, k) for k in SETTING_KEYS if getattr(self, k) is not None}
        if self.pins is not None:
            entries["pins"] = list(self.pins)
        return entries


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """What :meth:`~.sessions.SessionStore.list` filters and sorts by (every given filter
    applies; ``since``/``until`` keep sessions active in that window)."""

    notebook: str | None = None
    model: str | None = None
    since: float | datetime | None = None
    until: float | datetime | None = None
    status: str | Iterable[str] | None = None
    sort: SortKey = "updated"
    descending: bool = True
    limit: int | None = 50
    delegated: bool = False
    """Keep delegated child sessions too (``link_kind='delegation'``): hidden by default,
    since a child is part of its parent's run, never the conversation to continue."""
    user: str | None = None
    """Only this user's sessions (and, with ``legacy``, those from before schema 6, which
    have no user); ``None``: every session (store/audit.py)."""
    legacy: bool = True


DELEGATION = "delegation"
"""The ``link_kind`` of a child agent's session (migration 0005)."""

_SELECT = (
    "SELECT s.id, s.title, s.model, s.api_mode, s.notebook_path, s.status, s.parent_id,"
    " s.link_kind, s.fork_at, s.created_at, s.updated_at, s.ended_at, s.end_reason,"
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id),"
    " (SELECT sum(u.cost) FROM usage_ledger u WHERE u.session_id = s.id),"
    " s.config FROM sessions s"
)
_FIELDS = [f.name for f in fields(SessionInfo)]


def _info(row: Sequence[Any]) -> SessionInfo:
    columns = dict(zip(_FIELDS, row, strict=True))
    columns["config"] = json.loads(columns["config"])
    return SessionInfo(**columns)


def _timestamp(value: float | datetime | None) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else value


def by_id(db: StoreDatabase, session_id: str) -> SessionInfo:
    """The session with exactly this id."""
    row = db.conn.execute(_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    return _info(row)


def find(db: StoreDatabase, id_or_prefix: str, *, scope: UserScope = EVERYONE) -> SessionInfo:
    """The session with this id, or the only one whose id starts with it (6+ chars),
    among the sessions of ``scope`` (another user's is not found: store/scope.py)."""
    mine, whose = scope.clause()
    row = db.conn.execute(
        _SELECT + f" WHERE s.id = ? AND {mine}", (id_or_prefix, *whose)
    ).fetchone()
    if row is not None:
        return _info(row)
    if len(id_or_prefix) < MIN_PREFIX:
        raise SessionNotFoundError(
            f"no session {id_or_prefix!r} (an id prefix needs {MIN_PREFIX}+ characters)"
        )
    rows = db.conn.execute(
        f"SELECT id, title FROM sessions s WHERE substr(id, 1, ?) = ? AND {mine}"
        " ORDER BY updated_at DESC",
        (len(id_or_prefix), id_or_prefix, *whose),
    ).fetchall()
    if not rows:
        raise SessionNotFoundError(f"no session {id_or_prefix!r}")
    if len(rows) > 1:
        listed = "; ".join(f"{sid} ({title or 'untitled'})" for sid, title in rows[:10])
        more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        raise AmbiguousSessionError(
            f"{id_or_prefix!r} matches {len(rows)} sessions: {listed}{more}; "
            "give more characters of the id"
        )
    return by_id(db, rows[0][0])


def select(db: StoreDatabase, where: SessionFilter) -> list[SessionInfo]:
    """The sessions ``where`` keeps, in its order."""
    if where.sort not in SORT_COLUMNS:
        raise ValueError(f"sort must be one of {sorted(SORT_COLUMNS)}, not {where.sort!r}")
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (
        ("s.notebook_path = ?", where.notebook),
        ("s.model = ?", where.model),
        ("s.updated_at >= ?", _timestamp(where.since)),
        ("s.created_at <= ?", _timestamp(where.until)),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    if where.status is not None:
        statuses = [where.status] if isinstance(where.status, str) else list(where.status)
        clauses.append(f"s.status IN ({','.join('?' * len(statuses))})")
        params += statuses
    if where.user is not None:
        mine, whose = UserScope(where.user, where.legacy).clause()
        clauses.append(mine)
        params += whose
    if not where.delegated:
        clauses.append(f"s.link_kind IS DISTINCT FROM '{DELEGATION}'")
    kept = " WHERE " + " AND ".join(clauses) if clauses else ""
    order = "DESC" if where.descending else "ASC"
    ordered = f" ORDER BY {SORT_COLUMNS[where.sort]} {order}, s.rowid {order}"
    query = _SELECT + kept + ordered
    if where.limit is not None:  # the rows first, then their counts (see page())
        inner = f"SELECT s.rowid FROM sessions s{kept}{ordered} LIMIT ?"
        query = _SELECT + f" WHERE s.rowid IN ({inner}){ordered}"
        params.append(where.limit)
    return [_info(row) for row in db.conn.execute(query, params)]


def children(
    db: StoreDatabase, session_id: str, *, scope: UserScope = EVERYONE
) -> list[SessionInfo]:
    """Sessions forked, compressed or delegated from this one, oldest first, among those
    of ``scope`` (anyone may name any session as a parent: see :func:`newest_descendant`)."""
    mine, whose = scope.clause()
    rows = db.conn.execute(
        _SELECT + f" WHERE s.parent_id = ? AND {mine} ORDER BY s.created_at, s.rowid",
        (session_id, *whose),
    )
    return [_info(row) for row in rows]


def delegated(db: StoreDatabase, session_id: str) -> list[SessionInfo]:
    """The child sessions the agent of ``session_id`` delegated to, oldest first."""
    rows = db.conn.execute(
        _SELECT + " WHERE s.parent_id = ? AND s.link_kind = ? ORDER BY s.created_at, s.rowid",
        (session_id, DELEGATION),
    )
    return [_info(row) for row in rows]


def newest_descendant(
    db: StoreDatabase, session_id: str, *, scope: UserScope = EVERYONE
) -> SessionInfo:
    """Follow ``compression`` children (the newest at each step) to the session that
    continues this conversation; the session itself when it was never compressed. Only
    children of ``scope`` count: a ``parent_id`` is whatever its writer put there, so
    another user's row naming this session as its parent must not become the session a
    resume continues (on the team store an instructor can read their students' rows, and
    a student could plant one; docs/architecture.md, "Admin policy")."""
    mine, whose = scope.clause()
    current = session_id
    seen = {current}
    while True:
        row = db.conn.execute(
            "SELECT id FROM sessions s WHERE parent_id = ? AND link_kind = 'compression'"
            f" AND {mine} ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (current, *whose),
        ).fetchone()
        if row is None or row[0] in seen:
            return by_id(db, current)
        current = row[0]
        seen.add(current)


def last_answer_model(db: StoreDatabase, session_id: str) -> str | None:
    """The model that wrote the session's last reply, as the provider named it (after a
    failover: the fallback that answered, while the session keeps its primary model)."""
    row = db.conn.execute(
        "SELECT model FROM messages WHERE session_id = ? AND role = 'assistant'"
        " AND model IS NOT NULL ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return str(row[0]) if row is not None else None


def count_sessions(db: StoreDatabase, *, scope: UserScope = EVERYONE) -> int:
    """How many sessions of ``scope`` the store holds (a listing's ``total``)."""
    mine, whose = scope.clause()
    row = db.conn.execute(f"SELECT count(*) FROM sessions s WHERE {mine}", whose).fetchone()
    return int(row[0])


def page(
    db: StoreDatabase, *, limit: int, offset: int = 0, scope: UserScope = EVERYONE
) -> list[SessionInfo]:
    """One page of the sessions of ``scope``, newest first by ``updated_at`` (the sessions
    API's listing). The page's rows are chosen first, from the indexes alone, so the
    per-row counts are made for the rows returned only, whichever index the user filter
    takes (sorting a whole user's sessions with their counts took 15 ms at 10,000)."""
    mine, whose = scope.clause()
    order = " ORDER BY s.updated_at DESC, s.rowid DESC"
    rows = db.conn.execute(
        _SELECT + f" WHERE s.rowid IN (SELECT s.rowid FROM sessions s WHERE {mine}{order}"
        f" LIMIT ? OFFSET ?){order}",
        (*whose, limit, offset),
    )
    return [_info(row) for row in rows]


def root_ids(db: StoreDatabase, session_ids: Sequence[str]) -> dict[str, str]:
    """The root of each session's lineage (forks, compactions and children followed up
    through ``parent_id``): the session itself when it has no parent. A hand-made cycle
    stops at :data:`ROOT_DEPTH` links and names the session itself."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    rows = db.conn.execute(
        "WITH RECURSIVE up(start, id, parent, depth) AS ("
        f" SELECT id, id, parent_id, 0 FROM sessions WHERE id IN ({marks})"
        " UNION ALL SELECT up.start, s.id, s.parent_id, up.depth + 1"
        " FROM up JOIN sessions s ON s.id = up.parent WHERE up.depth < ?)"
        " SELECT start, id FROM up WHERE parent IS NULL",
        (*session_ids, ROOT_DEPTH),
    )
    found = {start: root for start, root in rows}
    return {sid: found.get(sid, sid) for sid in session_ids}


ROOT_DEPTH = 10_000
"""How many parent links :func:`root_ids` follows at most."""
