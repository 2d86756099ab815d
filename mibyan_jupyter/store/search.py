"""Full-text search over every message, ranked by bm25, with highlighted snippets.

What a user types into a search box is not FTS5 syntax: ``foo-bar`` fails with "no such
column: bar", ``col:x`` is a column filter, a lone ``"`` or ``AND`` is an error. So the text is turned into a query
that cannot fail: each word (or ``"quoted phrase"``) becomes an FTS5 string, all of them
must match, and a word ending in ``*`` is a prefix search (``pand*`` finds ``pandas``).
Words with nothing to index (punctuation alone) are left out rather than matching nothing.

Messages are indexed in batches (see ``index_pending``), so a search first indexes what
the writers have appended since; when nothing is behind that costs two reads, no lock.

The query asks FTS5 for its best rows first (``ORDER BY rank LIMIT``), so snippets are
only computed for the hits returned, however many messages match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mibyan_jupyter.store.db import Database
from mibyan_jupyter.store.records import index_pending
from mibyan_jupyter.store.sessions import SessionStore

MARK_START = "["
MARK_END = "]"
ELLIPSIS = "…"
SNIPPET_TOKENS = 16

_TERM = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching message. ``score`` is bm25 negated: higher is better."""

    session_id: str
    title: str
    seq: int
    role: str
    snippet: str
    score: float


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for what a user typed; ``None`` when nothing is searchable."""
    terms: list[str] = []
    for match in _TERM.finditer(text):
        phrase, word = match.group(1), match.group(2)
        prefix = False
        if phrase is None:
            prefix = word.endswith("*")
            phrase = word.rstrip("*")
        if not any(char.isalnum() for char in phrase):
            continue
        quoted = '"' + phrase.replace('"', '""') + '"'
        terms.append(quoted + ("*" if prefix else ""))
    return " ".join(terms) or None


def catch_up(db: Database) -> None:
    """Index the messages appended since the last batch (only takes the write lock when
    there are some)."""
    (upto,) = db.conn.execute("SELECT indexed_upto FROM fts_state WHERE id = 1").fetchone()
    (newest,) = db.conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
    if newest > upto:
        index_pending(db)


def search(
    store_or_db: SessionStore | Database,
    text: str,
    *,
    limit: int = 20,
    session_id: str | None = None,
) -> list[SearchHit]:
    """The ``limit`` best messages matching every word of ``text`` (in one session when
    ``session_id`` is given, which must be a full id); ``[]`` for an empty query."""
    query = fts_query(text)
    if query is None or limit <= 0:
        return []
    db = store_or_db.db if isinstance(store_or_db, SessionStore) else store_or_db
    catch_up(db)
    snippet = (
        f"snippet(messages_fts, 0, '{MARK_START}', '{MARK_END}', '{ELLIPSIS}', {SNIPPET_TOKENS})"
    )
    if session_id is None:
        # FTS5 yields its best rows first and stops at the limit; join afterwards.
        sql = (
            "SELECT m.session_id, s.title, m.seq, m.role, f.snip, f.rank FROM"
            f" (SELECT rowid, {snippet} AS snip, rank FROM messages_fts"
            "  WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?) AS f"
            " JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id"
            " ORDER BY f.rank"
        )
        params: tuple[object, ...] = (query, limit)
    else:
        sql = (
            f"SELECT m.session_id, s.title, m.seq, m.role, {snippet}, rank FROM messages_fts"
            " JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id"
            " WHERE messages_fts MATCH ? AND m.session_id = ? ORDER BY rank LIMIT ?"
        )
        params = (query, session_id, limit)
    rows = db.conn.execute(sql, params).fetchall()
    return [
        SearchHit(session_id=sid, title=title, seq=seq, role=role, snippet=snip, score=-float(rank))
        for sid, title, seq, role, snip, rank in rows
    ]
