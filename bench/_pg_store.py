"""The PostgreSQL team store's figures for bench/store.py, through the store's own API.

Every figure goes through the code a kernel runs, on the same data sizes as the SQLite
figures of the same run, against a throwaway server (bench/_pg_server.py: unix socket,
fsync ON, ``synchronous_commit = on``, a hub user's login role, so row-level security
applies), opened as the ``%agent`` magic opens it (``store.backend.open_database``: the
kernel's pool). Nothing here writes SQL of its own except the bulk fill (bench/store.py's
``fill``, the columns ``append_message`` writes, through ``db.transaction()``) and the
count of rows after the concurrent run.

* pg_append_ms: ``records.append_message`` of one finished assistant message (with a tool
  call): its own transaction, durable when it returns; the median of ``appends`` single
  appends (pg_append_p99_ms: their 99th percentile); pg_append_ms_async_commit: the same
  with ``synchronous_commit = off`` (not what the store uses: it shows what the WAL flush
  costs; compare SQLite's ``append_ms_full``);
* pg_writer_append_ms / writer_append_ms: the same message as the loop hands it over, a
  ``MessageEnd`` awaited by a ``StoreWriter`` (the write lane's thread, the message and its
  usage-ledger row in one transaction), on each backend;
* pg_resume_10k_ms: ``resume.load_history`` of a 10,000-message session (typed, repaired,
  with the report), as SQLite's ``resume_10k_ms``;
* pg_fts_100k_ms: ``search.search`` of a word in 2 of 100,000 messages (fts_rare_100k_ms on
  SQLite); pg_fts_common_100k_ms: the 20 best of ~8,000 matches for two common words, the
  query of SQLite's ``fts_100k_ms``;
* pg_concurrent_20x200_s / pg_lost_rows: bench/_pg_concurrent.py, on the team store and
  (concurrent_20x200_s / lost_rows) on one SQLite file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import _pg_concurrent
from _pg_server import TeamStore, team_store

RARE = "quetzalcoatl"
"""A word in exactly two of the 100,000 messages: a search that must find the needles."""
RARE_AT = (12_345, 87_654)
Figures = dict[str, float | int | None]


def corpus(sample_messages: Callable[[int], list[Any]]) -> list[Any]:
    """The 100,000 messages both backends' full-text figures search (the same list)."""
    from mibyan_jupyter.core.messages import UserMessage

    messages = sample_messages(100_000)
    for at in RARE_AT:
        messages[at] = UserMessage(content=f"Where did the {RARE} sample {at} go?")
    return messages


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    fn()  # warm-up
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _p99(times: list[float]) -> float:
    return sorted(times)[min(len(times) - 1, round(len(times) * 0.99))]


def append_figures(db: Any, one: Any, appends: int, prefix: str) -> Figures:
    from mibyan_jupyter.store.records import append_message, insert_session

    session = insert_session(db, title="append")
    times = _timed(lambda: append_message(db, session, one), appends)
    return {
        f"{prefix}append_ms": round(statistics.median(times), 4),
        f"{prefix}append_p99_ms": round(_p99(times), 4),
    }


def writer_append_ms(db: Any, one: Any, appends: int) -> float:
    """One ``MessageEnd`` awaited by a ``StoreWriter`` (durable when the await returns)."""
    from mibyan_jupyter.core.events import MessageEnd
    from mibyan_jupyter.store.records import insert_session
    from mibyan_jupyter.store.writer import StoreWriter

    writer = StoreWriter(db, insert_session(db, title="writer"))
    event = MessageEnd(message=one)

    async def run() -> list[float]:
        times = []
        for _ in range(appends + 1):
            start = time.perf_counter()
            await writer(event)
            times.append((time.perf_counter() - start) * 1000)
        return times[1:]

    times = asyncio.run(run())
    failure = writer.error
    writer.close()
    assert failure is None, failure
    return round(statistics.median(times), 4)


def resume_ms(db: Any, resumable: Any, repeat: int) -> float:
    """``load_history`` of a 10,000-message session, as ``%agent resume`` reads it (the
    session and the reading are bench/store.py's, the same on both backends)."""
    resume = resumable(db)[0]
    return round(min(_timed(resume, repeat)), 2)


def search_figures(db: Any, sample_messages: Any, fill: Any, repeat: int) -> Figures:
    """``search`` over :func:`corpus` in ten 10,000-message sessions, as on SQLite."""
    from mibyan_jupyter.store.records import insert_session
    from mibyan_jupyter.store.search import search

    messages = corpus(sample_messages)
    for part in range(10):
        fill(db, insert_session(db, title=f"fts {part}"), messages[part * 10_000 :][:10_000])
    out: Figures = {}
    for key, words, found in (("pg_fts_100k_ms", RARE, 2), ("pg_fts_common_100k_ms", "dataframe summarise", 20)):  # fmt: skip

        def query(words: str = words, found: int = found) -> None:
            hits = search(db, words, limit=20)
            assert len(hits) == found, (words, len(hits))

        out[key] = round(min(_timed(query, repeat)), 2)
    return out


def _attempt(out: Figures, what: str, fn: Callable[[], Figures]) -> None:
    """Run one figure; a store path that is broken is named, and the others still run."""
    try:
        out.update(fn())
    except Exception as error:  # a broken path is named; the rest runs
        print(f"PostgreSQL {what}: BROKEN: {type(error).__name__}: {str(error)[:300]}")


def _pg_rows(server: TeamStore) -> Callable[[str], int]:
    def count(prefix: str) -> int:
        with server.admin() as admin:
            row = admin.execute(
                "SELECT count(*) FROM mibyan.messages WHERE starts_with(session_id, %s)",
                (prefix,),
            ).fetchone()
        return int(row[0])

    return count


def _sqlite_rows(path: Path) -> Callable[[str], int]:
    def count(prefix: str) -> int:
        with sqlite3.connect(path) as conn:
            row = conn.execute(
                "SELECT count(*) FROM messages WHERE substr(session_id, 1, ?) = ?",
                (len(prefix), prefix),
            ).fetchone()
        return int(row[0])

    return count


def _concurrent(target: str, count: Callable[[str], int], prefix: str) -> Figures:
    got = _pg_concurrent.run(target, count)
    return {
        f"{prefix}concurrent_20x200_s": got["s"],
        f"{prefix}lost_rows": got["lost_rows"],
        f"{prefix}concurrent_surfaced_errors": got["surfaced"] + got["crashed"],
    }


def sqlite_figures(folder: Path, one: Any, appends: int) -> Figures:
    """The SQLite side of what only this module measures (writer, 20 processes)."""
    from mibyan_jupyter.store.db import Database

    out: Figures = {}
    with Database(folder / "writer.sqlite3") as db:
        out["writer_append_ms"] = writer_append_ms(db, one, appends)
    path = folder / "concurrent.sqlite3"
    Database(path).close()  # created and migrated once, before 20 processes open it
    out.update(_concurrent(str(path), _sqlite_rows(path), ""))
    return out


def figures(sample_messages: Any, fill: Any, resumable: Any, appends: int, repeat: int) -> Figures:
    """Every ``pg_*`` figure, or ``{}`` with a printed reason when PostgreSQL or the
    ``postgres`` extra is missing."""
    from mibyan_jupyter.store.backend import open_database

    one = sample_messages(2)[1]
    out: Figures = {}
    with team_store() as server:
        if isinstance(server, str):
            print(f"PostgreSQL figures skipped: {server}")
            return {}
        with closing(open_database(server.url)) as db:
            _attempt(out, "append", lambda: append_figures(db, one, appends, "pg_"))
            _attempt(out, "writer", lambda: {"pg_writer_append_ms": writer_append_ms(db, one, appends)})  # fmt: skip
            _attempt(out, "resume", lambda: {"pg_resume_10k_ms": resume_ms(db, resumable, repeat)})  # fmt: skip
            _attempt(out, "search", lambda: search_figures(db, sample_messages, fill, repeat))
        os.environ["PGOPTIONS"] = "-c synchronous_commit=off"
        try:
            with closing(open_database(server.url)) as db:
                got = append_figures(db, one, appends, "async_")
            out["pg_append_ms_async_commit"] = got["async_append_ms"]
        finally:
            del os.environ["PGOPTIONS"]
        _attempt(out, "20x200", lambda: _concurrent(server.url, _pg_rows(server), "pg_"))
    print(
        "PostgreSQL (unix socket, fsync on, RLS), through the store: "
        + ", ".join(f"{key} {value}" for key, value in out.items())
    )
    return out
