"""Full-text search over every message, ranked (bm25 on SQLite, ``ts_rank`` on the
PostgreSQL team store), with highlighted snippets.

What a user types into a search box is not FTS5 syntax: ``foo-bar`` fails with "no such
column: bar", ``col:x`` is a column filter, a lone ``"`` or ``AND`` is an error. So the text is turned into a query
that cannot fail: each word (or ``"quoted phrase"``) becomes an FTS5 string, all of them
must match, and a word ending in ``*`` is a prefix search (``pand*`` finds ``pandas``).
Words with nothing to index (punctuation alone) are left out rather than matching nothing.

Messages are indexed in batches (see ``index_pending``), so a search first indexes what
the writers have appended since; when nothing is behind that costs two reads, no lock.

The query asks FTS5 for its best rows first (``ORDER BY rank``, which FTS5 itself
answers when it is the outer loop) and stops at the limit after the join, so snippets are
only computed for the hits returned, however many messages match. The join keeps the
reader's own sessions (store/scope.py) and the ``LIMIT`` counts what is left: limiting
inside the full-text subquery, before the join, would give a user fewer hits than they
have whenever other users' messages rank higher.

Highlights are offsets, never marks left in the text: a snippet is the message's own
text, verbatim (``sales["year"]`` stays ``sales["year"]``), and ``SearchHit.highlights``
says which spans matched. FTS5's ``snippet()`` can only mark matches by inserting strings,
so it is given two private-use characters the message does not contain (checked per hit;
a message holding the usual two gets two others), which are then taken out again as
offsets. No content, not even one holding those very characters, can shift a highlight.

On the team store the same terms become a ``tsquery`` and the same window is cut in
Python from the message's text, with no marks at all (store/search_pg.py); the query
text is cleaned first (lone surrogates, NUL) so neither database is handed what it
cannot encode (docs/architecture.md, "The team store (PostgreSQL)").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.records import index_pending
from mibyan_jupyter.store.scope import UserScope, user_scope
from mibyan_jupyter.store.search_pg import ELLIPSIS, SNIPPET_TOKENS, Term, pg_search, safe_param
from mibyan_jupyter.store.sessions import SessionStore

MARK_START = "\ue000"
MARK_END = "\ue001"
"""The marks ``snippet()`` is given first (private use: no meaning of their own)."""
_PRIVATE_USE = (range(0xE000, 0xF900), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))

_TERM = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching message. ``score``: higher is better (bm25 negated on SQLite,
    ``ts_rank`` on PostgreSQL: not comparable across backends)."""

    session_id: str
    title: str
    seq: int
    role: str
    snippet: str
    """The message's text around the matches, verbatim (``…`` where it was cut)."""
    score: float
    highlights: tuple[tuple[int, int], ...] = ()
    """``(start, end)`` offsets into ``snippet`` of the matched words, in order."""

    def parts(self) -> list[tuple[str, bool]]:
        """The snippet as ``(text, matched)`` pieces, in order, for a renderer to mark."""
        pieces: list[tuple[str, bool]] = []
        at = 0
        for start, end in self.highlights:
            if start > at:
                pieces.append((self.snippet[at:start], False))
            pieces.append((self.snippet[start:end], True))
            at = end
        if at < len(self.snippet):
            pieces.append((self.snippet[at:], False))
        return pieces


def query_terms(text: str) -> list[Term]:
    """Each word or ``"quoted phrase"`` of ``text`` and whether it ends in ``*`` (a
    prefix); words with nothing to index (punctuation alone) are left out. Both backends
    build their query from these, so the grammar is one."""
    terms: list[Term] = []
    for match in _TERM.finditer(text):
        phrase, word = match.group(1), match.group(2)
        prefix = False
        if phrase is None:
            prefix = word.endswith("*")
            phrase = word.rstrip("*")
        if any(char.isalnum() for char in phrase):
            terms.append((phrase, prefix))
    return terms


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for what a user typed; ``None`` when nothing is searchable."""
    quoted = (
        '"' + phrase.replace('"', '""') + '"' + ("*" if prefix else "")
        for phrase, prefix in query_terms(text)
    )
    return " ".join(quoted) or None


def catch_up(db: StoreDatabase) -> None:
    """Index the messages appended since the last batch (only takes the write lock when
    there are some)."""
    (upto,) = db.conn.execute("SELECT indexed_upto FROM fts_state WHERE id = 1").fetchone()
    (newest,) = db.conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
    if newest > upto:
        index_pending(db)


def search(
    store_or_db: SessionStore | StoreDatabase,
    text: str,
    *,
    limit: int = 20,
    session_id: str | None = None,
    scope: UserScope | None = None,
) -> list[SearchHit]:
    """The ``limit`` best messages matching every word of ``text`` (in one session when
    ``session_id`` is given, which must be a full id) among the sessions of ``scope``
    (``None``: the current user's, store/scope.py); ``[]`` for an empty query."""
    text = safe_param(text)  # no lone surrogate or NUL reaches either database
    query = fts_query(text)
    if query is None or limit <= 0:
        return []
    db = store_or_db.db if isinstance(store_or_db, SessionStore) else store_or_db
    scope = scope or user_scope(db)
    if db.dialect.is_postgres:  # tsvector and ts_rank, through search_messages
        rows = pg_search(db, query_terms(text), limit=limit, session_id=session_id, scope=scope)
        return [SearchHit(*row) for row in rows]
    catch_up(db)
    mine, whose = scope.clause()
    marks = (MARK_START, MARK_END)
    one = " AND m.session_id = ?" if session_id is not None else ""
    # messages_fts is the outer loop and yields its best rows first (FTS5 consumes the
    # ORDER BY rank), so the LIMIT stops after `limit` rows that passed the join.
    sql = (
        "SELECT m.id, m.session_id, s.title, m.seq, m.role,"
        f" snippet(messages_fts, 0, ?, ?, '{ELLIPSIS}', {SNIPPET_TOKENS}), rank,"
        " instr(m.text, ?) + instr(m.text, ?) > 0"
        " FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid"
        " CROSS JOIN sessions s ON s.id = m.session_id"
        f" WHERE messages_fts MATCH ? AND {mine}{one} ORDER BY rank LIMIT ?"
    )
    params = (*marks, *marks, query, *whose, *((session_id,) if one else ()), limit)
    hits: list[SearchHit] = []
    for rowid, sid, title, seq, role, snip, rank, collided in db.conn.execute(sql, params):
        start, end = marks
        if collided:  # the message holds the marks itself: ask again with two it lacks
            start, end = _free_marks(db, rowid)
            snip = _snippet(db, query, rowid, start, end)
        text, spans = split_marks(snip, start, end)
        hits.append(SearchHit(sid, title, seq, role, text, -float(rank), spans))
    return hits


def _free_marks(db: StoreDatabase, rowid: int) -> tuple[str, str]:
    """Two private-use characters that the message ``rowid`` does not contain."""
    (text,) = db.conn.execute("SELECT text FROM messages WHERE id = ?", (rowid,)).fetchone()
    used = set(text or "")
    free = (chr(c) for block in _PRIVATE_USE for c in block if chr(c) not in used)
    return next(free), next(free)


def _snippet(db: StoreDatabase, query: str, rowid: int, start: str, end: str) -> str:
    row = db.conn.execute(
        f"SELECT snippet(messages_fts, 0, ?, ?, '{ELLIPSIS}', {SNIPPET_TOKENS})"
        " FROM messages_fts WHERE messages_fts MATCH ? AND rowid = ?",
        (start, end, query, rowid),
    ).fetchone()
    return str(row[0]) if row else ""


def split_marks(marked: str, start: str, end: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``marked`` without the ``start``/``end`` marks, and the offsets they enclosed."""
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    opened: int | None = None
    for piece in re.split(f"({re.escape(start)}|{re.escape(end)})", marked):
        if piece == start:
            opened = at
        elif piece == end and opened is not None:
            if at > opened:
                spans.append((opened, at))
            opened = None
        elif piece:
            text.append(piece)
            at += len(piece)
    return "".join(text), tuple(spans)
