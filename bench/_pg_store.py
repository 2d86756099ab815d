"""The PostgreSQL team store's figures for bench/store.py, on a throwaway server started
here (``mibyan_jupyter.testing.pg_cluster``: unix socket, fsync ON, the default
``synchronous_commit = on``), connected as a hub user's role (row-level security applies),
through the kernel's pool (``store.pg.connect.PgDatabase``).

The ``SessionStore`` API is not ported to PostgreSQL yet, so each figure times the SQL the
port will issue, written out here:

* pg_append_ms: one finished assistant message (with a tool call) made durable in its own
  transaction: the 13-column INSERT of ``records.insert_message`` with the next ``seq``
  computed inside it, one statement in autocommit mode (one round trip), as the port is
  planned to write it; pg_append_4rt_ms: the same as an explicit transaction of four
  round trips (BEGIN, the seq read, the INSERT, COMMIT), as the SQLite code is shaped;
* pg_resume_10k_ms: a 10,000-message session read back as the fast path of
  ``store/loading.py`` does (the rows' JSON joined by ``string_agg``, one
  ``validate_json``); no repair pass;
* pg_fts_100k_ms: the 20 best messages of 100,000 for a two-word query, through
  ``search_messages`` (ts_rank, GIN index), then their text and ``ts_headline`` snippets;
* pg_append_ms_async_commit: the same with ``synchronous_commit = off`` (the commit does
  not wait for the WAL flush: a crashed kernel still loses nothing, a crashed server or
  machine may lose the last ~0.6 s; never corruption). The store does not use it;
  it shows what the disk's flush costs (compare SQLite's ``append_ms_full``);
* pg_concurrent_20x200_s / pg_lost_rows: 20 processes, each its own pool, appending 200
  messages each to sessions of their own in one database, timed from the moment all are
  connected; every row is counted after, and a process that failed fails the run.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from typing import Any

COLUMNS = (
    "INSERT INTO messages (session_id, seq, role, text, data, tool_calls, tool_call_id,"
    " tool_name, stop_reason, usage, model, aborted, created_at)"
)
APPEND_SQL = COLUMNS + " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
ONE_STATEMENT = (
    COLUMNS + " SELECT %s, coalesce(max(seq), -1) + 1, %s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s"
    " FROM messages WHERE session_id = %s RETURNING seq"
)
"""The append as one statement: in autocommit mode it is its own transaction, one round
trip instead of four (BEGIN, the seq read, the INSERT, COMMIT)."""
PROCESSES, TURNS = 20, 200
NEXT_SEQ = "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE session_id = %s"


def _row(message: Any) -> tuple[str, str, str | None, str | None, str | None]:
    from mibyan_jupyter.store.records import encode_message, message_text

    calls = getattr(message, "tool_calls", ())
    tool_calls = "[" + ",".join(c.model_dump_json() for c in calls) + "]" if calls else None
    usage = message.usage.model_dump_json() if getattr(message, "usage", None) else None
    return message_text(message), encode_message(message), tool_calls, usage, None


def append(db: Any, session: str, message: Any) -> int:
    """What ``records.append_message`` will do on PostgreSQL: one statement, one
    transaction (the next seq is computed inside the INSERT; one writer per session)."""
    text, data, tool_calls, usage, _ = _row(message)
    with db.pool.connection() as conn:
        row = conn.execute(
            ONE_STATEMENT,
            (session, message.role, text, data, tool_calls, None, None,
             getattr(message, "stop_reason", None), usage, None, 0, time.time(), session),
        ).fetchone()  # fmt: skip
    return int(row[0])


def append_in_transaction(db: Any, session: str, message: Any) -> int:
    """The same as SQLite's store writes it today: an explicit transaction, four trips."""
    text, data, tool_calls, usage, _ = _row(message)
    with db.transaction() as conn:
        (seq,) = conn.execute(NEXT_SEQ, (session,)).fetchone()
        conn.execute(
            APPEND_SQL,
            (session, seq, message.role, text, data, tool_calls, None, None,
             getattr(message, "stop_reason", None), usage, None, 0, time.time()),
        )  # fmt: skip
    return int(seq)


def _new_session(db: Any, session: str) -> None:
    with db.transaction() as conn:
        now = time.time()
        conn.execute(
            "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (%s, %s, %s, %s)",
            (session, "bench", now, now),
        )


def _fill(db: Any, session: str, messages: list[Any]) -> None:
    """Bulk rows in one transaction (COPY is refused under row-level security)."""
    now = time.time()
    rows = [(session, seq, m.role, *_row(m)[:2], now) for seq, m in enumerate(messages)]
    with db.transaction() as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO messages (session_id, seq, role, text, data, created_at)"
            " VALUES (%s,%s,%s,%s,%s,%s)",
            rows,
        )


def _worker(url: str, password: str, name: str, sample: list[Any], ready: Any) -> None:
    from mibyan_jupyter.store.pg.connect import PgDatabase

    os.environ["PGPASSWORD"] = password
    with PgDatabase(url) as db:
        _new_session(db, name)
        ready.wait()  # all 20 connected: the clock starts
        for turn in range(TURNS):
            append(db, name, sample[turn % len(sample)])


def _concurrent(url: str, password: str, sample: list[Any]) -> float:
    """Seconds from the moment all 20 processes are connected until the last append."""
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(PROCESSES + 1)
    workers = [
        context.Process(target=_worker, args=(url, password, f"c{k}", sample, ready))
        for k in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    ready.wait(timeout=300)
    started = time.perf_counter()
    for worker in workers:
        worker.join(timeout=300)
    seconds = time.perf_counter() - started
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    assert not failed, f"worker exit codes {failed}: an error surfaced"
    return seconds


def _append_ms(db: Any, sample: list[Any], appends: int, session: str, how: Any = None) -> float:
    how = how or append
    _new_session(db, session)
    how(db, session, sample[1])  # warm-up
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(appends):
            how(db, session, sample[1])
        runs.append((time.perf_counter() - start) * 1000 / appends)
    return round(statistics.median(runs), 4)


def figures(sample_messages: Any, appends: int, repeat: int) -> dict[str, float | None]:
    """Every ``pg_*`` figure, or ``{}`` with a printed reason when PostgreSQL or the
    ``postgres`` extra is missing."""
    try:
        import psycopg

        from mibyan_jupyter.admin import add_user
        from mibyan_jupyter.store.pg import PgDatabase, migrate
        from mibyan_jupyter.testing.pg_cluster import PgCluster, PgUnavailable
    except ImportError as missing:
        print(f"PostgreSQL figures skipped: {missing} (install mibyan-jupyter[postgres])")
        return {}
    try:
        cluster = PgCluster(fsync=True).start()
    except PgUnavailable as missing:
        print(f"PostgreSQL figures skipped: {missing}")
        return {}
    out: dict[str, float | None] = {}
    try:
        with psycopg.connect(cluster.conninfo(), autocommit=True) as admin:
            migrate(admin)
            add_user(admin, "bench", course=None, role="student", password="bench-pw")
        os.environ["PGPASSWORD"] = "bench-pw"
        url = cluster.url("postgres", "bench")
        sample = sample_messages(4)
        with PgDatabase(url) as db:
            out["pg_append_ms"] = _append_ms(db, sample, appends, "append")
            out["pg_append_4rt_ms"] = _append_ms(
                db, sample, appends, "append4", append_in_transaction
            )
            out.update(_reads(db, sample_messages, repeat))
        os.environ["PGOPTIONS"] = "-c synchronous_commit=off"
        with PgDatabase(url) as db:
            out["pg_append_ms_async_commit"] = _append_ms(db, sample, appends, "async")
        del os.environ["PGOPTIONS"]
        seconds = _concurrent(url, "bench-pw", sample)
        with psycopg.connect(cluster.conninfo(), autocommit=True) as admin:
            (stored,) = admin.execute(
                "SELECT count(*) FROM mibyan.messages WHERE session_id LIKE 'c%%'"
            ).fetchone() or (0,)
        out["pg_concurrent_20x200_s"] = round(seconds, 2)
        out["pg_lost_rows"] = PROCESSES * TURNS - int(stored)
    finally:
        cluster.stop()
    print(
        f"PostgreSQL (unix socket, fsync on, RLS): append {out['pg_append_ms']} ms "
        f"({out['pg_append_4rt_ms']} ms in four round trips, {out['pg_append_ms_async_commit']}"
        " ms with synchronous_commit=off), resume "
        f"10,000 {out['pg_resume_10k_ms']} ms, FTS over 100,000 {out['pg_fts_100k_ms']} ms, "
        f"20x200 appends {out['pg_concurrent_20x200_s']} s, {out['pg_lost_rows']} rows lost"
    )
    return out


def _best_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def _reads(db: Any, sample_messages: Any, repeat: int) -> dict[str, float | None]:
    from mibyan_jupyter.core.messages import MESSAGES_ADAPTER

    _new_session(db, "resume")
    _fill(db, "resume", sample_messages(10_000))

    def resume() -> object:
        with db.transaction() as conn:
            (joined,) = conn.execute(
                "SELECT '[' || string_agg(data, ',' ORDER BY seq) || ']' FROM messages"
                " WHERE session_id = %s",
                ("resume",),
            ).fetchone()
        messages = MESSAGES_ADAPTER.validate_json(joined)
        assert len(messages) == 10_000
        return messages

    messages = sample_messages(100_000)
    for part in range(10):
        _new_session(db, f"fts{part}")
        _fill(db, f"fts{part}", messages[part * 10_000 : (part + 1) * 10_000])

    def query() -> object:
        with db.transaction() as conn:
            rows = conn.execute(
                "SELECT h.session_id, h.seq, h.rank, ts_headline('simple', m.text, q,"
                " 'StartSel=\ue000, StopSel=\ue001, MaxWords=16, MinWords=5')"
                " FROM websearch_to_tsquery('simple', %s) q,"
                " search_messages(q, 20) h JOIN messages m ON m.id = h.id ORDER BY h.rank DESC",
                ("dataframe summarise",),
            ).fetchall()
        assert len(rows) == 20, len(rows)
        return rows

    return {
        "pg_resume_10k_ms": round(_best_ms(resume, repeat), 2),
        "pg_fts_100k_ms": round(_best_ms(query, repeat), 2),
    }
