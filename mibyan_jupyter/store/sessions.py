"""Sessions as the user sees them: find, list, rename, delete, fork, follow lineage.

:class:`SessionStore` is the small Python API the ``%agent`` magic is a thin layer over.
Decisions worth knowing:

* **Ids by prefix.** A unique prefix of at least 6 characters is accepted wherever an id
  is, like git's short hashes; an ambiguous one lists the candidates instead of guessing.
* **Status stays true after a crash.** A kernel that dies cannot say so, so every read
  (``get``, ``last``, ``list``) first turns sessions still marked running/awaiting
  approval by a process of this host that no longer exists into ``interrupted``.
* **Fork** copies the messages (and the records of their tool calls) into a new session
  in one transaction, so a crash leaves either no fork or a whole one. Usage is not
  copied: a session's cost is what was spent in it.
* **Config holds no secrets.** Keys named like credentials are dropped and the values of
  secret environment variables are blanked before a config is written (decision 7).
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from mibyan_jupyter.secrets import scrub_config
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.records import insert_session, new_id

MIN_PREFIX = 6
SortKey = Literal["updated", "created", "title"]
_SORT_COLUMNS: dict[str, str] = {
    "updated": "s.updated_at",
    "created": "s.created_at",
    "title": "s.title",
}
_LIVE = ("running", "awaiting_approval")


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


_SELECT = (
    "SELECT s.id, s.title, s.model, s.api_mode, s.notebook_path, s.status, s.parent_id,"
    " s.link_kind, s.fork_at, s.created_at, s.updated_at, s.ended_at, s.end_reason,"
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id),"
    " (SELECT sum(u.cost) FROM usage_ledger u WHERE u.session_id = s.id),"
    " s.config FROM sessions s"
)
_FIELDS = [f.name for f in fields(SessionInfo)]
_MESSAGE_COLUMNS = (
    "seq, role, text, data, tool_calls, tool_call_id, tool_name, stop_reason, usage, model,"
    " aborted, created_at"
)
_TOOL_CALL_COLUMNS = (
    "call_id, name, arguments, status, decision, scope, decided_by, reason, requested_at,"
    " decided_at, started_at, finished_at"
)


def _info(row: Sequence[Any]) -> SessionInfo:
    columns = dict(zip(_FIELDS, row, strict=True))
    columns["config"] = json.loads(columns["config"])
    return SessionInfo(**columns)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists; unsure means alive (never mark a
    running session interrupted by mistake). Windows has no harmless probe: always True."""
    if pid == os.getpid() or sys.platform == "win32":
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    return True


def _timestamp(value: float | datetime | None) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else value


class SessionStore:
    """The sessions of one database. Pass a path (default: :func:`default_path`) or an
    open :class:`Database` (which the store then does not close)."""

    def __init__(self, path: str | Path | Database | None = None) -> None:
        self._owns = not isinstance(path, Database)
        self.db = path if isinstance(path, Database) else Database(path)

    def close(self) -> None:
        if self._owns:
            self.db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- finding sessions -------------------------------------------------------------

    def create(
        self,
        title: str = "",
        *,
        model: str | None = None,
        api_mode: str | None = None,
        notebook_path: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        session_id = insert_session(
            self.db,
            title=title,
            model=model,
            api_mode=api_mode,
            notebook_path=notebook_path,
            config=scrub_config(config or {}),
        )
        return self._by_id(session_id)

    def get(self, id_or_prefix: str) -> SessionInfo:
        """The session with this id, or the only one whose id starts with it (6+ chars)."""
        self.mark_interrupted_if_dead()
        row = self.db.conn.execute(_SELECT + " WHERE s.id = ?", (id_or_prefix,)).fetchone()
        if row is not None:
            return _info(row)
        if len(id_or_prefix) < MIN_PREFIX:
            raise SessionNotFoundError(
                f"no session {id_or_prefix!r} (an id prefix needs {MIN_PREFIX}+ characters)"
            )
        rows = self.db.conn.execute(
            "SELECT id, title FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC",
            (len(id_or_prefix), id_or_prefix),
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
        return self._by_id(rows[0][0])

    def _by_id(self, session_id: str) -> SessionInfo:
        row = self.db.conn.execute(_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return _info(row)

    def last(self, notebook_path: str | None = None) -> SessionInfo | None:
        """The most recently updated session (of this notebook, when given)."""
        found = self.list(notebook=notebook_path, limit=1)
        return found[0] if found else None

    def list(
        self,
        *,
        notebook: str | None = None,
        model: str | None = None,
        since: float | datetime | None = None,
        until: float | datetime | None = None,
        status: str | Iterable[str] | None = None,
        sort: SortKey = "updated",
        descending: bool = True,
        limit: int | None = 50,
    ) -> builtins.list[SessionInfo]:
        """Sessions matching every filter given. ``since``/``until`` (epoch seconds or
        datetimes) keep sessions active in that window: updated at or after ``since``,
        created at or before ``until``."""
        if sort not in _SORT_COLUMNS:
            raise ValueError(f"sort must be one of {sorted(_SORT_COLUMNS)}, not {sort!r}")
        self.mark_interrupted_if_dead()
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        for clause, value in (
            ("s.notebook_path = ?", notebook),
            ("s.model = ?", model),
            ("s.updated_at >= ?", _timestamp(since)),
            ("s.created_at <= ?", _timestamp(until)),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        if status is not None:
            statuses = [status] if isinstance(status, str) else builtins.list(status)
            where.append(f"s.status IN ({','.join('?' * len(statuses))})")
            params += statuses
        query = _SELECT + (" WHERE " + " AND ".join(where) if where else "")
        order = "DESC" if descending else "ASC"
        query += f" ORDER BY {_SORT_COLUMNS[sort]} {order}, s.rowid {order}"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        return [_info(row) for row in self.db.conn.execute(query, params)]

    # -- changing sessions ------------------------------------------------------------

    def rename(self, session_id: str, title: str) -> SessionInfo:
        info = self.get(session_id)
        with self.db.transaction() as conn:
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title.strip(), info.id))
        return self._by_id(info.id)

    def delete(self, session_id: str) -> None:
        """Delete a session with its messages (and their search index rows), tool calls
        and usage. Sessions forked or compressed from it keep their messages and lose
        the link (``parent_id`` becomes NULL)."""
        info = self.get(session_id)
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM sessions WHERE id = ?", (info.id,))

    def fork(self, session_id: str, *, at: int | None = None) -> SessionInfo:
        """A new session holding the first ``at`` messages (default: all) of this one,
        linked to it (``link_kind='fork'``). A cut inside a tool batch is allowed: resume
        repairs the calls left without results."""
        parent = self.get(session_id)
        child = new_id()
        with self.db.transaction() as conn:
            count = int(
                conn.execute(
                    "SELECT count(*) FROM messages WHERE session_id = ?", (parent.id,)
                ).fetchone()[0]
            )
            cut = count if at is None else at
            if not 0 <= cut <= count:
                raise StoreError(f"cannot fork at {cut}: session {parent.id} has {count} messages")
            now = time.time()
            conn.execute(
                "INSERT INTO sessions (id, parent_id, link_kind, fork_at, title, model, api_mode,"
                " notebook_path, config, created_at, updated_at) SELECT ?, id, 'fork', ?, title,"
                " model, api_mode, notebook_path, config, ?, ? FROM sessions WHERE id = ?",
                (child, cut, now, now, parent.id),
            )
            conn.execute(
                f"INSERT INTO messages (session_id, {_MESSAGE_COLUMNS}) SELECT ?,"
                f" {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq < ? ORDER BY seq",
                (child, parent.id, cut),
            )
            conn.execute(  # the approval records of the calls whose results were copied
                f"INSERT INTO tool_calls (session_id, {_TOOL_CALL_COLUMNS}) SELECT ?,"
                f" {_TOOL_CALL_COLUMNS} FROM tool_calls t WHERE t.session_id = ? AND EXISTS"
                " (SELECT 1 FROM messages m WHERE m.session_id = ? AND m.tool_call_id = t.call_id)",
                (child, parent.id, child),
            )
        return self._by_id(child)

    # -- lineage ----------------------------------------------------------------------

    def children(self, session_id: str) -> builtins.list[SessionInfo]:
        """Sessions forked or compressed from this one, oldest first."""
        info = self.get(session_id)
        rows = self.db.conn.execute(
            _SELECT + " WHERE s.parent_id = ? ORDER BY s.created_at, s.rowid", (info.id,)
        )
        return [_info(row) for row in rows]

    def lineage(self, session_id: str) -> builtins.list[SessionInfo]:
        """The ancestors of a session, root first, parent last (itself not included)."""
        current = self.get(session_id)
        ancestors: builtins.list[SessionInfo] = []
        seen = {current.id}
        while current.parent_id is not None and current.parent_id not in seen:
            current = self._by_id(current.parent_id)
            seen.add(current.id)
            ancestors.append(current)
        return ancestors[::-1]

    def newest_compression_descendant(self, session_id: str) -> SessionInfo:
        """Follow ``compression`` children (the newest at each step) to the session that
        continues this conversation; the session itself when it was never compressed."""
        current = self.get(session_id).id
        seen = {current}
        while True:
            row = self.db.conn.execute(
                "SELECT id FROM sessions WHERE parent_id = ? AND link_kind = 'compression'"
                " ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (current,),
            ).fetchone()
            if row is None or row[0] in seen:
                return self._by_id(current)
            current = row[0]
            seen.add(current)

    # -- status -----------------------------------------------------------------------

    def mark_interrupted_if_dead(self) -> builtins.list[str]:
        """Sessions running (or awaiting approval) in a process of this host that no
        longer exists become ``interrupted``; returns their ids. ``updated_at`` is kept,
        so an old crash does not become the "last" session."""
        host = socket.gethostname()
        rows = self.db.conn.execute(
            "SELECT id, owner_pid FROM sessions WHERE status IN (?, ?) AND owner_host = ?",
            (*_LIVE, host),
        ).fetchall()
        dead = [(sid, pid) for sid, pid in rows if pid is not None and not pid_alive(pid)]
        if not dead:
            return []
        with self.db.transaction() as conn:
            for sid, pid in dead:  # re-checked in the lock: another kernel may own it now
                conn.execute(
                    "UPDATE sessions SET status = 'interrupted', end_reason = 'interrupted',"
                    " owner_pid = NULL, owner_host = NULL WHERE id = ? AND status IN (?, ?)"
                    " AND owner_pid = ? AND owner_host = ?",
                    (sid, *_LIVE, pid, host),
                )
        return [sid for sid, _ in dead]

    # -- "always" approval decisions --------------------------------------------------

    def always_rules(self) -> dict[str, bool]:
        """Remembered "always" decisions, for ``ApprovalPolicy(always=...)``."""
        rows = self.db.conn.execute("SELECT tool, approved FROM approval_rules ORDER BY tool")
        return {tool: bool(approved) for tool, approved in rows}

    def save_always_rule(self, tool: str, approved: bool) -> None:
        """Persist an "always" decision (``ApprovalPolicy(on_always=...)``)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO approval_rules (tool, approved, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (tool) DO UPDATE SET approved = excluded.approved,"
                " created_at = excluded.created_at",
                (tool, int(approved), time.time()),
            )

    def forget_always_rule(self, tool: str) -> bool:
        """Drop a remembered decision; whether there was one."""
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM approval_rules WHERE tool = ?", (tool,))
        return cursor.rowcount > 0
