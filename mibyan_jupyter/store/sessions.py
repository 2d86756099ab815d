"""Sessions as the user sees them: find, list, rename, delete, fork, follow lineage.

:class:`SessionStore` is the small Python API the ``%agent`` magic is a thin layer over.
Decisions worth knowing:

* **Ids by prefix.** A unique prefix of at least 6 characters is accepted wherever an id
  is, like git's short hashes; an ambiguous one lists the candidates instead of guessing.
* **Status stays true after a crash.** A kernel that dies cannot say so, so each public
  read (``get``, ``last``, ``list``, ``resolve``, ...) first sweeps once: sessions still
  marked running/awaiting approval whose owner is not alive become ``interrupted``. Whether
  an owner is alive is decided in one place, :mod:`.liveness` (the store's ``liveness``).
  Opening a session to continue it is one call, :meth:`SessionStore.resolve`, so one sweep.
* **Fork** copies the messages (and the records of their tool calls) into a new session
  in one transaction, so a crash leaves either no fork or a whole one. Usage is not
  copied: a session's cost is what was spent in it.
* **Config holds no secrets.** Keys named like credentials are dropped and the values of
  secret environment variables are blanked before a config is written
  (docs/architecture.md, "Decisions", 7).
* **"Always" approval decisions** live in :mod:`.approval_rules`; the three methods here
  are the store's face for them.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from mibyan_jupyter.core.safe_text import clean_text
from mibyan_jupyter.secrets import REDACT, scrub_config
from mibyan_jupyter.store import session_queries as queries
from mibyan_jupyter.store.approval_rules import ApprovalRules
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.liveness import LeaseLiveness, Liveness, interrupt_dead_owners
from mibyan_jupyter.store.records import insert_session, new_id
from mibyan_jupyter.store.scope import UserScope, user_scope
from mibyan_jupyter.store.session_queries import (
    MIN_PREFIX,
    AmbiguousSessionError,
    SessionFilter,
    SessionInfo,
    SessionNotFoundError,
    SortKey,
)

__all__ = [
    "MIN_PREFIX",
    "AmbiguousSessionError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "SortKey",
]

_MESSAGE_COLUMNS = (
    "seq, role, text, data, tool_calls, tool_call_id, tool_name, stop_reason, usage, model,"
    " aborted, created_at"
)
_TOOL_CALL_COLUMNS = (
    "call_id, name, arguments, status, decision, scope, decided_by, reason, requested_at,"
    " decided_at, started_at, finished_at"
)


class SessionStore:
    """The sessions of one database. Pass a SQLite file's path, a ``postgresql://`` URL of
    the team store (store/backend.py; default: ``MIBYAN_DB_URL``, else
    :func:`default_path`) or an open database (which the store then does not close), and
    optionally the :class:`~.liveness.Liveness` that decides whether a session's owner is
    alive."""

    def __init__(
        self,
        path: str | Path | StoreDatabase | None = None,
        *,
        liveness: Liveness | None = None,
    ) -> None:
        self._owns = path is None or isinstance(path, (str, Path))
        self.db = open_database(path) if path is None or isinstance(path, (str, Path)) else path
        self.liveness: Liveness = liveness if liveness is not None else LeaseLiveness()
        self.approval_rules = ApprovalRules(self.db)

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
        return queries.by_id(self.db, session_id)

    def get(self, id_or_prefix: str, *, scope: UserScope | None = None) -> SessionInfo:
        """The session with this id, or the only one whose id starts with it (6+ chars),
        among ``scope``'s sessions (default: the current user's, store/scope.py). Another
        user's session is not found, in the very words of a missing one, so the answer
        never confirms that it exists; an instructor's review passes ``EVERYONE`` after the
        roster said yes (docs/architecture.md, "Admin policy")."""
        self.mark_interrupted_if_dead()
        return queries.find(self.db, id_or_prefix, scope=scope or user_scope(self.db))

    def resolve(self, target: str = "last", *, notebook: str | None = None) -> SessionInfo | None:
        """The session that continues ``target`` (``"last"``: the most recent session, of
        ``notebook`` when given; else an id or prefix), following ``compression`` children
        to the newest; ``None`` when ``target`` is ``"last"`` and there is no session. One
        sweep for dead owners: this is the read that opening a session needs."""
        self.mark_interrupted_if_dead()
        if target == "last":
            found = queries.select(self.db, self._mine(SessionFilter(notebook=notebook, limit=1)))
            if not found:
                return None
            target = found[0].id
        scope = user_scope(self.db)
        info = queries.find(self.db, target, scope=scope)
        return queries.newest_descendant(self.db, info.id, scope=scope)

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
        delegated: bool = False,
    ) -> builtins.list[SessionInfo]:
        """Sessions matching every filter given. ``since``/``until`` (epoch seconds or
        datetimes) keep sessions active in that window: updated at or after ``since``,
        created at or before ``until``. Delegated child sessions only with ``delegated``."""
        where = SessionFilter(
            notebook, model, since, until, status, sort, descending, limit, delegated
        )
        if sort not in queries.SORT_COLUMNS:
            raise ValueError(f"sort must be one of {sorted(queries.SORT_COLUMNS)}, not {sort!r}")
        self.mark_interrupted_if_dead()
        return queries.select(self.db, self._mine(where))

    def _mine(self, where: SessionFilter) -> SessionFilter:
        """``where`` kept to the current user's sessions (store/audit.py: best effort on
        SQLite, the environment names the user; docs/architecture.md, "Admin policy")."""
        scope = user_scope(self.db)
        return replace(where, user=scope.user, legacy=scope.legacy)

    # -- changing sessions ------------------------------------------------------------

    def rename(self, session_id: str, title: str) -> SessionInfo:
        info = self.get(session_id)
        with self.db.transaction() as conn:
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title.strip(), info.id))
        return queries.by_id(self.db, info.id)

    def set_pins(self, session_id: str, pins: Sequence[str]) -> SessionInfo:
        """Record the session's pinned instructions (``%agent pin``) in its config, in
        order, replacing those recorded; read back as ``info.settings.pins``. They are
        kept there, not in the transcript, because the prompt builder renders them into
        the system prompt (docs/architecture.md, "Prompt builder") and a compaction's
        child copies the config, so a pin is never summarised away."""
        info = self.get(session_id)
        texts = [REDACT(clean_text(str(pin))).strip() for pin in pins]
        with self.db.transaction() as conn:
            read = "SELECT config FROM sessions WHERE id = ?" + self.db.dialect.lock_row
            row = conn.execute(read, (info.id,)).fetchone()  # a concurrent write waits
            config = json.loads(row[0]) if row is not None else {}
            if not isinstance(config, dict):
                config = {}
            config["pins"] = [text for text in texts if text]
            conn.execute(
                "UPDATE sessions SET config = ? WHERE id = ?",
                (json.dumps(scrub_config(config)), info.id),
            )
        return queries.by_id(self.db, info.id)

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
        return queries.by_id(self.db, child)

    # -- lineage ----------------------------------------------------------------------

    def children(self, session_id: str) -> builtins.list[SessionInfo]:
        """Sessions forked or compressed from this one, oldest first (the user's own)."""
        return queries.children(self.db, self.get(session_id).id, scope=user_scope(self.db))

    def lineage(self, session_id: str) -> builtins.list[SessionInfo]:
        """The ancestors of a session, root first, parent last (itself not included), up
        to the first that is not the user's (a ``parent_id`` may name anyone's session)."""
        scope = user_scope(self.db)
        current = self.get(session_id)
        ancestors: builtins.list[SessionInfo] = []
        seen = {current.id}
        while current.parent_id is not None and current.parent_id not in seen:
            try:
                current = queries.find(self.db, current.parent_id, scope=scope)
            except SessionNotFoundError:
                break
            seen.add(current.id)
            ancestors.append(current)
        return ancestors[::-1]

    def newest_compression_descendant(self, session_id: str) -> SessionInfo:
        """Follow ``compression`` children (the newest at each step) to the session that
        continues this conversation; the session itself when it was never compressed."""
        info = self.get(session_id)
        return queries.newest_descendant(self.db, info.id, scope=user_scope(self.db))

    # -- status -----------------------------------------------------------------------

    def mark_interrupted_if_dead(self) -> builtins.list[str]:
        """Sessions running (or awaiting approval) whose owner :attr:`liveness` calls dead
        become ``interrupted``; returns their ids (see
        :func:`~.liveness.interrupt_dead_owners`)."""
        return interrupt_dead_owners(self.db, self.liveness)

    # -- "always" approval decisions (kept by .approval_rules) --------------------------

    def always_rules(self) -> dict[str, bool]:
        """Remembered "always" decisions, for ``ApprovalPolicy(always=...)``."""
        return self.approval_rules.all()

    def save_always_rule(self, tool: str, approved: bool) -> None:
        """Persist an "always" decision (``ApprovalPolicy(on_always=...)``)."""
        self.approval_rules.save(tool, approved)

    def forget_always_rule(self, tool: str) -> bool:
        """Drop a remembered decision; whether there was one."""
        return self.approval_rules.forget(tool)
