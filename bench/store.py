"""The session store: durable append, resume, full-text search and export, timed.

* append: one finished message made durable (its own transaction), as the writer does
  for every MessageEnd. Side by side, when openai-agents is installed, its
  ``SQLiteSession.add_items`` of the same message on a file database, both in WAL mode at
  the same ``synchronous`` level: NORMAL (our default: a committed message survives a
  killed kernel) and FULL (also survives power loss).
* resume_10k: a 10,000-message session read back into typed, repaired messages, as a
  resume does (one query, one validation, the repair pass with its report); side by side,
  openai-agents' ``SQLiteSession.get_items`` of the same messages (untyped dicts), in the
  same run: ``resume_ratio_vs_openai_agents`` (goal, issue 10: <= 0.3).
* fts_100k: a full-text query over 100,000 messages (bm25-ranked, with snippets).
* export_1k: a 1,000-message session exported as a validated notebook.
* fts_rare_100k_ms: the same search for a word in 2 of the 100,000 messages.
* writer_append_ms, concurrent_20x200_s, lost_rows: the append as a ``StoreWriter`` makes
  it, and 20 processes x 200 turns through ``StoreWriter`` on one file (bench/_pg_store.py).
* pg_*: the PostgreSQL team store side by side, in the same run, through the same store
  API on the same data sizes (bench/_pg_store.py says what each times; goal, issue 14:
  pg_append_ms <= 1 ms over a unix socket, 0 rows lost).

Goals (issue 4): append <= 0.6x openai-agents; resume_10k <= 30 ms; fts_100k <= 50 ms;
export_1k <= 200 ms. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The 20 writer processes are spawned: each re-imports this script, so its folder must be
# on their path too (it is not when a child's path is rebuilt from the interpreter's).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pg_store import RARE, corpus, sqlite_figures
from _pg_store import figures as pg_figures

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.store.db import Database
from mibyan_jupyter.store.records import append_message, insert_session

WORDS = [
    "notebook",
    "kernel",
    "dataframe",
    "plot",
    "agent",
    "tool",
    "session",
    "export",
    "search",
    "resume",
    "budget",
    "cell",
]


def sample_messages(n: int) -> list[Message]:
    """A realistic mix: prompts, answers with tool calls, tool results."""
    messages: list[Message] = []
    i = 0
    while len(messages) < n:
        word = WORDS[i % len(WORDS)]
        messages.append(
            UserMessage(content=f"Please look at the {word} number {i} and summarise it.")
        )
        call = ToolCall(
            id=f"call_{i}",
            function=FunctionCall(
                name="run_python", arguments=json.dumps({"code": f"df{i}.describe()"})
            ),
        )
        messages.append(
            AssistantMessage(
                content=f"Checking the {word}.",
                tool_calls=(call,),
                stop_reason="tool_use",
                usage=Usage(input=900 + i, output=40, total=940 + i, cost=0.0012),
            )
        )
        messages.append(
            ToolMessage(
                tool_call_id=call.id, name="run_python", content=f"count 100\nmean {i}.5\nstd 2.1"
            )
        )
        messages.append(
            AssistantMessage(
                content=f"The {word} {i} has a mean of {i}.5; nothing unusual.",
                usage=Usage(input=1000 + i, output=30, total=1030 + i, cost=0.0011),
            )
        )
        i += 1
    return messages[:n]


ONE = sample_messages(2)[1]  # an assistant message with a tool call


def time_ours(path: Path, durability: str, n: int) -> float:
    db = Database(path, durability=durability)  # type: ignore[arg-type]
    session = insert_session(db, title="bench")
    append_message(db, session, ONE)  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        append_message(db, session, ONE)
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed * 1000 / n


def time_openai_agents(path: Path, synchronous: str, n: int) -> float | None:
    try:
        from agents.memory.sqlite_session import SQLiteSession
    except ImportError:
        return None
    original = SQLiteSession._configure_connection

    def configure(conn: Any) -> None:
        original(conn)
        conn.execute(f"PRAGMA synchronous={synchronous}")

    SQLiteSession._configure_connection = staticmethod(configure)  # type: ignore[method-assign]
    try:
        session = SQLiteSession("bench", db_path=str(path))
        item = {
            "type": "function_call",
            "call_id": "call_1",
            "name": "run_python",
            "arguments": json.dumps({"code": "df1.describe()"}),
        }

        async def run() -> float:
            await session.add_items([item])  # warm-up
            start = time.perf_counter()
            for _ in range(n):
                await session.add_items([item])
            return (time.perf_counter() - start) * 1000 / n

        result = asyncio.run(run())
        session.close()
        return result
    finally:
        SQLiteSession._configure_connection = staticmethod(original)  # type: ignore[method-assign]


def openai_agents_resume_ms(path: Path, n: int, repeat: int) -> float | None:
    """``SQLiteSession.get_items`` of ``n`` items (untyped dicts), for reference."""
    try:
        from agents.memory.sqlite_session import SQLiteSession
    except ImportError:
        return None
    from mibyan_jupyter.core.messages import MESSAGE_ADAPTER

    items = [
        MESSAGE_ADAPTER.dump_python(m, mode="json", exclude_none=True) for m in sample_messages(n)
    ]
    session = SQLiteSession("bench", db_path=str(path))

    async def run() -> float:
        await session.add_items(items)  # type: ignore[arg-type]
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            got = await session.get_items()
            best = min(best, (time.perf_counter() - start) * 1000)
            assert len(got) == n
        return best

    result = asyncio.run(run())
    session.close()
    return result


def fill(db: Database, session: str, messages: list[Message]) -> None:
    """Bulk insert (one transaction) through the same columns append_message writes."""
    from mibyan_jupyter.store.records import encode_message, message_text

    now = time.time()
    rows = [
        (session, seq, m.role, message_text(m), encode_message(m), now)
        for seq, m in enumerate(messages)
    ]
    with db.transaction() as conn:
        conn.executemany(
            "INSERT INTO messages (session_id, seq, role, text, data, created_at) VALUES (?,?,?,?,?,?)",
            rows,
        )


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def resumable(db: Any) -> tuple[Callable[[], object], Any, Any]:
    """A 10,000-message session in ``db`` (either backend), and its resume as ``%agent
    resume`` reads it (typed, repaired, with the report); also its store and info."""
    from mibyan_jupyter.store.resume import load_history
    from mibyan_jupyter.store.session_queries import by_id
    from mibyan_jupyter.store.sessions import SessionStore

    session = insert_session(db, title="resume")
    fill(db, session, sample_messages(10_000))
    store, info = SessionStore(db), by_id(db, session)

    def resume() -> object:
        history = load_history(store, info)
        assert len(history.messages) == 10_000
        assert not history.repairs
        return history

    return resume, store, info


def resume_figures(folder: Path, repeat: int) -> dict[str, float | None]:
    """A 10,000-message session resumed as ``%agent resume`` does, and openai-agents'
    untyped ``get_items`` of the same messages."""
    from mibyan_jupyter.core.fakes import ScriptedModel
    from mibyan_jupyter.store.resume import resume_agent

    db = Database(folder / "resume.sqlite3")
    resume, store, info = resumable(db)

    def resume_an_agent() -> object:  # the same, plus the Agent's own check of it
        return resume_agent(store, info, stream_fn=ScriptedModel([]))

    ours = best_ms(resume, repeat)
    with_agent = best_ms(resume_an_agent, repeat)
    db.close()
    theirs = openai_agents_resume_ms(folder / "oa-resume.sqlite3", 10_000, repeat)
    print(
        f"resume 10,000 messages: {ours:.2f} ms typed and repaired "
        f"(openai-agents get_items, untyped: {theirs or float('nan'):.2f} ms)"
    )
    return {
        "resume_10k_ms": round(ours, 2),
        "resume_agent_10k_ms": round(with_agent, 2),
        "openai_agents_get_items_10k_ms": round(theirs, 2) if theirs else None,
        "resume_ratio_vs_openai_agents": round(ours / theirs, 3) if theirs else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for level in ("normal", "full"):
            ours = statistics.median(
                time_ours(folder / f"ours-{level}-{k}.sqlite3", level, args.appends)
                for k in range(3)
            )
            theirs_runs = [
                time_openai_agents(folder / f"oa-{level}-{k}.sqlite3", level.upper(), args.appends)
                for k in range(3)
            ]
            theirs = (
                statistics.median(r for r in theirs_runs if r is not None)
                if all(r is not None for r in theirs_runs)
                else None
            )
            suffix = "" if level == "normal" else "_full"
            figures[f"append_ms{suffix}"] = round(ours, 4)
            figures[f"openai_agents_append_ms{suffix}"] = round(theirs, 4) if theirs else None
            figures[f"ratio_vs_openai_agents{suffix}"] = round(ours / theirs, 3) if theirs else None
            print(
                f"append, synchronous={level.upper():6}: ours {ours:.4f} ms, openai-agents {theirs or float('nan'):.4f} ms"
            )

        figures.update(resume_figures(folder, args.repeat))

        db = Database(folder / "fts.sqlite3")
        messages = corpus(sample_messages)
        for part in range(10):
            session = insert_session(db, title=f"fts {part}")
            fill(db, session, messages[part * 10_000 : (part + 1) * 10_000])
        from mibyan_jupyter.store.search import search

        def query() -> object:
            return search(db, "dataframe summarise", limit=20)

        from mibyan_jupyter.store.records import index_pending

        start = time.perf_counter()
        indexed = index_pending(db)
        figures["fts_index_100k_ms"] = round((time.perf_counter() - start) * 1000, 1)
        assert indexed == 100_000, indexed
        hits = query()
        assert isinstance(hits, list)
        assert len(hits) == 20, len(hits)
        figures["fts_100k_ms"] = round(best_ms(query, args.repeat), 2)
        figures["fts_rare_100k_ms"] = round(
            best_ms(lambda: search(db, RARE, limit=20), args.repeat), 2
        )
        print(f"FTS over 100,000 messages: {figures['fts_100k_ms']} ms")
        db.close()
        figures.update(sqlite_figures(folder, ONE, args.appends))

    try:
        from mibyan_jupyter.export.notebook import SessionMeta, export_notebook

        thousand = sample_messages(1000)
        meta = SessionMeta(id="bench", title="bench", model="demo")  # type: ignore[call-arg]
        export_notebook(thousand, session=meta)  # warm-up (imports nbformat once)
        figures["export_1k_ms"] = round(
            best_ms(lambda: export_notebook(thousand, session=meta), args.repeat), 2
        )
        print(f"export 1,000 messages: {figures['export_1k_ms']} ms")
    except ImportError:
        figures["export_1k_ms"] = None
    figures.update(pg_figures(sample_messages, fill, resumable, args.appends, args.repeat))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
