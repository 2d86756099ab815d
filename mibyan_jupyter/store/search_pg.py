"""Full-text search on the PostgreSQL team store: ``tsvector`` matching and ``ts_rank``
through ``search_messages``, with snippets cut in Python from the message's own text.

Why through the function: under row-level security PostgreSQL uses the GIN index only
for leakproof operators, and ``@@`` is not one, so a user's own ``WHERE tsv @@ q`` scans
every row they may read (~500 ms over 100,000 messages). ``mibyan.search_messages``
(migration ``0006_users_audit.sql``) runs as the owner, uses the index and applies the
same visibility as the policies: the caller's sessions and, for an instructor, their
students' (docs/architecture.md, "The team store (PostgreSQL)"). The hits' titles and
texts are then read through the caller's own policies.

The query is built by PostgreSQL itself from what the user typed, never by interpolating
it: each term is a parameter of ``phraseto_tsquery('simple', ?)``, which tokenizes it as
the index did (``foo-bar`` is ``'foo-bar' <-> 'foo' <-> 'bar'``) and ignores every
operator character; a ``pand*`` term gets ``:*`` on its last lexeme (by appending to the
query's own text form, which only holds quoted lexemes and operators); terms are joined
by ``&&`` (all must match; a term in which PostgreSQL finds no lexeme, like ``²``,
matches nothing rather than being dropped). Text PostgreSQL cannot take (NUL, lone
surrogates) is replaced first. Where the backends still differ, it is the index's own
tokens: the ``simple`` configuration keeps accents (``loadéd`` is not ``loaded``), and
PostgreSQL's parser keeps a file name, path, URL or e-mail address as one token
(``csv`` does not find ``a.csv``); a message is searchable in its first 100,000
characters.

Scope: the function already gives what row-level security lets the caller read, which
is :data:`~.scope.EVERYONE` here. A narrower scope (an instructor's own sessions, one
student's) is applied after it, and the function is asked for more rows while fewer than
``limit`` passed and it had more to give (migration 0006's function has no user filter).

Snippets are the message's text verbatim with offsets (the SQLite design, store/search.py):
``SNIPPET_TOKENS`` words chosen as FTS5's ``snippet()`` chooses them (1000 for each term
a window holds, 1 for a repeat, centred on its matches, or from a sentence's start when
that holds as many), so both backends cut a message alike (46 of 46 hits identical on a
sample of texts and queries). Matches are found by one word rule applied to the terms
and the text alike (runs of letters and digits, lower-cased as the ``simple``
configuration folds them). No marks are ever inserted, so no content can shift a
highlight.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from mibyan_jupyter.core.safe_text import clean_text
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.scope import UserScope

Term = tuple[str, bool]
"""A phrase (one word or several) and whether its last word is a prefix."""
Span = tuple[int, int]
Match = tuple[int, int, int]
"""A term's occurrence: its first and last token, and which term."""
Row = tuple[str, str, int, str, str, float, tuple[Span, ...]]
"""session id, title, seq, role, snippet, score, highlights (a ``SearchHit``'s fields)."""

ELLIPSIS = "…"
SNIPPET_TOKENS = 16
WIDTH = SNIPPET_TOKENS  # a short name for the arithmetic below
INDEXED_CHARS = 100_000
"""How much of a message the index holds (``left(text, 100000)``, migration 0001)."""
_CANDIDATES = 200
"""Window starts tried per message (the first matches; the rest cannot rank higher
than the best of a dense cluster often enough to be worth scanning)."""
_GROWTH = 8
"""How much more a narrowed search asks the function for, each time it comes up short."""
_NO_WORDS = 120
"""Characters shown of a hit in which the word rule finds no word at all."""
_WORD = re.compile(r"[^\W_]+")


def safe_param(text: str) -> str:
    """``text`` as PostgreSQL accepts a parameter: lone surrogates become U+FFFD, NUL a
    space (a text value cannot hold it)."""
    return clean_text(text).replace("\x00", " ")


def _term_sql(prefix: bool) -> str:
    if not prefix:
        return "phraseto_tsquery('simple', ?)"
    # The text form ends with the last quoted lexeme; an empty query (only punctuation)
    # stays empty instead of becoming the invalid ':*'.
    return (
        "(SELECT CASE WHEN numnode(p) = 0 THEN p ELSE (p::text || ':*')::tsquery END"
        " FROM phraseto_tsquery('simple', ?) AS p)"
    )


def tsquery_sql(terms: Sequence[Term]) -> tuple[str, str, str, tuple[str, ...]]:
    """The SQL of the query for ``terms``: a select list of one tsquery per term (``t0``,
    ``t1``...), the condition that each holds a lexeme, their ``&&``, and the parameters.
    A term PostgreSQL finds nothing to index in (``²``) matches nothing, as every word
    must match; ``&&`` alone would drop it and widen the search."""
    names = [f"t{number}" for number in range(len(terms))]
    select = ", ".join(f"{_term_sql(prefix)} AS t{n}" for n, (_p, prefix) in enumerate(terms))
    each = " AND ".join(f"numnode(t.{name}) > 0" for name in names)
    both = " && ".join(f"t.{name}" for name in names)
    return f"SELECT {select}", each, both, tuple(safe_param(p) for p, _ in terms)


def pg_search(
    db: StoreDatabase,
    terms: Sequence[Term],
    *,
    limit: int,
    session_id: str | None,
    scope: UserScope,
) -> list[Row]:
    """The ``limit`` best messages matching all ``terms`` that ``scope`` admits, ranked
    (see the module docstring)."""
    select, each, query, params = tsquery_sql(terms)
    mine, whose = scope.clause()
    # One row with how many rows the function gave, then the hits that passed the scope
    # (their order restored below: a UNION promises none).
    sql = (
        f"WITH t AS MATERIALIZED ({select}), f AS MATERIALIZED (SELECT r.* FROM t,"
        f" mibyan.search_messages({query}, ?, ?) AS r WHERE {each}),"
        " h AS (SELECT f.id, f.session_id, s.title, f.seq, m.role, left(m.text, ?) AS text, f.rank"
        " FROM f"
        " JOIN messages m ON m.id = f.id JOIN sessions s ON s.id = f.session_id"
        f" WHERE {mine} ORDER BY f.rank DESC, f.id LIMIT ?)"
        " SELECT (SELECT count(*) FROM f), NULL, NULL, NULL, NULL, NULL, NULL, NULL"
        " UNION ALL SELECT 0, id, session_id, title, seq, role, text, rank FROM h"
    )
    asked = limit
    while True:
        # Only what the index saw, and one character more to tell a longer text by.
        read = (*params, asked, session_id, INDEXED_CHARS + 1, *whose, limit)
        rows = db.conn.execute(sql, read).fetchall()
        given = max(row[0] for row in rows)
        found = sorted((row for row in rows if row[1] is not None), key=lambda r: (-r[7], r[1]))
        if scope.user is None or len(found) >= limit or given < asked:
            break
        asked *= _GROWTH  # the function's best rows were others' (an instructor's students)
    hits: list[Row] = []
    for _given, _id, sid, title, seq, role, text, rank in found:
        shown, marks = snippet(text or "", terms)
        hits.append((sid, title, seq, role, shown, float(rank), marks))
    return hits


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _matches(tokens: list[str], terms: Sequence[Term]) -> list[Match]:
    """Every occurrence of every term, in order."""
    found: list[Match] = []
    for number, (phrase, prefix) in enumerate(terms):
        words = _words(phrase)
        if not words:
            continue
        *head, tail = words
        width = len(words)
        for at in range(len(tokens) - width + 1):
            if tokens[at : at + width - 1] != head:
                continue
            last = tokens[at + width - 1]
            if last == tail or (prefix and last.startswith(tail)):
                found.append((at, at + width - 1, number))
    found.sort()
    return found


def _sentence_starts(text: str, spans: list[Span]) -> list[int]:
    """Token indexes that begin a sentence: the first, and each one after whitespace after
    a ``.`` or ``:`` (FTS5's rule)."""
    starts = [0]
    for number in range(1, len(spans)):
        before = text[spans[number - 1][1] : spans[number][0]]
        bare = before.rstrip(" \t\n\r")
        if len(bare) < len(before) and bare[-1:] in (".", ":"):
            starts.append(number)
    return starts


def _score(found: list[Match], firsts: list[int], at: int, count: int) -> tuple[int, int]:
    """FTS5's score of the window starting at token ``at`` (1000 for each term seen in
    it, 1 for each repeat) and the start that centres its matches."""
    seen: set[int] = set()
    score, head, tail = 0, -1, 0
    for first, last, term in found[bisect_left(firsts, at) : bisect_left(firsts, at + WIDTH)]:
        score += 1 if term in seen else 1000
        seen.add(term)
        head = first if head < 0 else head
        tail = last + 1
    spare = WIDTH - (tail - head)
    centred = head - (spare // 2 if spare >= 0 else -(-spare // 2))  # C's division
    return score, max(0, min(centred, count - WIDTH))


def _window(text: str, spans: list[Span], found: list[Match]) -> int:
    """The first of the ``SNIPPET_TOKENS`` words shown, chosen as FTS5's ``snippet()``
    chooses (so both backends cut a message alike): the window around the matches with
    the most distinct terms, or one starting at a sentence that holds as many."""
    count = len(spans)
    starts = _sentence_starts(text, spans) if count > WIDTH else []
    firsts = [match[0] for match in found]
    best, best_score = 0, 0
    for first, _last, _term in found[:_CANDIDATES]:
        score, centred = _score(found, firsts, first, count)
        if score > best_score:
            best, best_score = centred, score
        sentence = starts[bisect_right(starts, first) - 1] if starts else first
        if sentence < first:
            score = _score(found, firsts, sentence, count)[0] + (120 if sentence == 0 else 100)
            if score > best_score:
                best, best_score = sentence, score
    return best


def snippet(text: str, terms: Sequence[Term]) -> tuple[str, tuple[Span, ...]]:
    """Up to ``SNIPPET_TOKENS`` words of ``text`` around its matches, verbatim (``…``
    where cut), and the offsets of the matches in it."""
    scan = text[:INDEXED_CHARS]
    spans = [(m.start(), m.end()) for m in _WORD.finditer(scan)]
    tokens = [scan[a:b].lower() for a, b in spans]
    found = _matches(tokens, terms)
    first = _window(scan, spans, found)
    last = min(len(spans), first + WIDTH) - 1
    whole_tail = last == len(spans) - 1 and len(scan) == len(text)
    begin = 0 if first == 0 else spans[first][0]
    end = len(text) if whole_tail or not spans else spans[last][1]
    if not spans:  # nothing this word rule reads as a word: the text's start
        end = min(len(text), _NO_WORDS)
    lead = ELLIPSIS if begin > 0 else ""
    shown = lead + text[begin:end] + (ELLIPSIS if end < len(text) else "")
    marks: list[Span] = []
    for at, until, _term in found:
        if not first <= at <= last:
            continue
        until = min(until, last)  # a phrase cut by the window's end is marked up to it
        start, stop = spans[at][0] - begin + len(lead), spans[until][1] - begin + len(lead)
        if marks and start < marks[-1][1]:  # overlapping matches: one highlight
            marks[-1] = (marks[-1][0], max(stop, marks[-1][1]))
        else:
            marks.append((start, stop))
    return shown, tuple(marks)
