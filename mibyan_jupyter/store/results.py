"""Big tool results kept in full: the store side of the core's ``ResultStore``.

Why (issue 10, item 5; docs/architecture.md, "Store"): a tool result over the spill limit
reaches the model as a preview, and its full text must still exist somewhere the session
goes (another machine, an export), or ``read_result`` could not page through it after a
restart. So :class:`SessionResults` keeps it in the ``tool_results`` table (migration
``0003_results.sql``), redacted like every other stored text.

* **Lineage.** A compaction moves the session to a child (``link_kind='compression'``);
  the previews the child inherited still name results kept by the parent. Paging therefore
  looks the id up in the session and all its ancestors (fork parents too: a fork copies
  the previews as well).
* **Never on the event loop.** ``keep`` is called from the tool batch, on the kernel's
  event loop. Given the session's :class:`~.writer.StoreWriter`, the row goes through the
  writer's lane (ordered before the spilled message, fenced by the lease, kept and
  retried while the disk is full or locked), the session id is the writer's (it follows
  the compaction), and the text is served from memory until the row has landed. Without a
  writer (the plain Python API) the row is written at once; a failed write is kept in
  memory and retried at the next ``keep``, so a result is always readable in this process.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import StoreError

if TYPE_CHECKING:
    from mibyan_jupyter.store.writer import StoreWriter

_log = logging.getLogger(__name__)

LINEAGE_DEPTH = 10_000
"""How far up the parent links a lookup goes (a guard against a hand-made cycle)."""

_LINEAGE = (
    "WITH RECURSIVE line(id, depth) AS (SELECT ?, 0 UNION ALL SELECT s.parent_id,"
    " line.depth + 1 FROM sessions s JOIN line ON s.id = line.id"
    f" WHERE s.parent_id IS NOT NULL AND line.depth < {LINEAGE_DEPTH})"
)


def _insert(conn: Conn, session_id: str, row: tuple[str, str, str, str, int, float]) -> None:
    conn.execute(
        "INSERT INTO tool_results (session_id, result_id, call_id, tool_name,"
        " content, chars, created_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        (session_id, *row),
    )


class SessionResults:
    """A ``core.results.ResultStore`` backed by the session database (see the module).

    ``session_id`` is where results are kept and from whose lineage they are read;
    ``writer`` (optional) is that session's writer: then the writer's current session is
    used instead, and rows are written on its lane."""

    def __init__(
        self, db: StoreDatabase, session_id: str, *, writer: StoreWriter | None = None
    ) -> None:
        self.db = db
        self._session_id = session_id
        self.writer = writer
        self._pending: dict[str, str] = {}
        """Results not yet known to be in the database, by id (their full text)."""
        self._unwritten: dict[str, tuple[str, tuple[str, str, str, str, int, float]]] = {}
        self._lock = threading.Lock()

    @property
    def session_id(self) -> str:
        """The session results are kept in now (the writer's, after a compaction)."""
        return self.writer.session_id if self.writer is not None else self._session_id

    def keep(self, call_id: str, tool_name: str, content: str) -> str:
        """Keep ``content`` in full; returns the id ``read_result`` pages it by."""
        result_id = f"res_{uuid.uuid4().hex[:20]}"
        row = (result_id, call_id, tool_name, REDACT(content), len(content), time.time())
        session_id = self.session_id
        with self._lock:
            self._pending[result_id] = row[3]
        if self.writer is not None:
            self.writer.write(self._op(session_id, row))
            return result_id
        with self._lock:
            self._unwritten[result_id] = (session_id, row)
        self._flush()
        return result_id

    def _op(
        self, session_id: str, row: tuple[str, str, str, str, int, float]
    ) -> Callable[[Conn], Callable[[], None]]:
        def run(conn: Conn) -> Callable[[], None]:
            _insert(conn, session_id, row)
            return lambda: self._landed(row[0])

        return run

    def _landed(self, result_id: str) -> None:
        with self._lock:
            self._pending.pop(result_id, None)
            self._unwritten.pop(result_id, None)

    def _flush(self) -> None:
        """Write the rows a direct write could not make yet (no writer), oldest first."""
        with self._lock:
            waiting = list(self._unwritten.values())
        for session_id, row in waiting:
            try:
                with self.db.transaction() as conn:
                    _insert(conn, session_id, row)
            except (StoreError, sqlite3.Error) as error:  # PostgreSQL's are StoreErrors
                _log.warning("could not keep tool result %s yet: %s", row[0], error)
                return
            self._landed(row[0])

    def full(self, result_id: str) -> str | None:
        """The whole text of a result of this session's lineage (``None``: unknown id)."""
        with self._lock:
            pending = self._pending.get(result_id)
        if pending is not None:
            return pending
        return full_text(self.db, self.session_id, result_id)

    def page(self, result_id: str, offset: int, limit: int) -> str | None:
        """``limit`` characters from ``offset`` (``""`` past the end; ``None``: unknown id)."""
        offset, limit = max(0, offset), max(0, limit)
        with self._lock:
            pending = self._pending.get(result_id)
        if pending is not None:
            return pending[offset : offset + limit]
        try:
            row = self.db.conn.execute(
                _LINEAGE + " SELECT substr(content, ?, ?) FROM tool_results WHERE result_id = ?"
                " AND session_id IN (SELECT id FROM line)",
                (self.session_id, offset + 1, limit, result_id),
            ).fetchone()
        except StoreError:
            raise  # the team store's failure is already one line naming it
        except sqlite3.Error as error:
            raise StoreError(f"cannot read tool result {result_id!r}: {error}") from None
        return None if row is None else str(row[0])


def full_text(db: StoreDatabase, session_id: str, result_id: str) -> str | None:
    """The stored text of ``result_id`` when it belongs to ``session_id``'s lineage."""
    row = db.conn.execute(
        _LINEAGE + " SELECT content FROM tool_results WHERE result_id = ?"
        " AND session_id IN (SELECT id FROM line)",
        (session_id, result_id),
    ).fetchone()
    return None if row is None else str(row[0])
