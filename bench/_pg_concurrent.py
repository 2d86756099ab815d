"""20 processes x 200 turns through ``StoreWriter`` on one database, for bench/store.py.

Each process is a kernel in miniature: it opens the store the way the ``%agent`` magic does
(``store.backend.open_database``: a SQLite file, or the team store's URL with its own
pool), makes a session of its own and records 200 turns through a ``StoreWriter``, each
turn a ``%%agent`` cell's events: ``AgentStart``, the user's ``MessageEnd``, the answer's
``MessageEnd`` (the message and its usage-ledger row in one transaction), ``AgentEnd`` (the
status back to idle). Every write is awaited as the loop awaits it, so a message is durable
before the next event. The clock runs from the moment all 20 are connected until the last
exits; then every message row is counted from the database itself (not from what the
processes believe they wrote), and a process that raised, or whose writer reported a store
failure (``take_news``: what the cell would have shown), is counted too.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import sys
import time
from typing import Any

PROCESSES, TURNS = 20, 200
MESSAGES_PER_TURN = 2
PREFIX = "conc-"
SURFACED = 2
"""A writer's exit status when its store failure reached the user (rows may still be all
there: a failure that passes is retried)."""


async def _turns(writer: Any, name: str) -> list[str]:
    from mibyan_jupyter.core.events import AgentEnd, AgentStart, MessageEnd
    from mibyan_jupyter.core.messages import AssistantMessage, Usage, UserMessage

    news: list[str] = []
    for turn in range(TURNS):
        user = UserMessage(content=f"{name}: summarise the dataframe of turn {turn}")
        answer = AssistantMessage(
            content=f"Turn {turn}: the dataframe has 100 rows; nothing unusual.",
            usage=Usage(input=900 + turn, output=40, total=940 + turn, cost=0.0012),
        )
        for event in (
            AgentStart(),
            MessageEnd(message=user),
            MessageEnd(message=answer),
            AgentEnd(messages=(user, answer)),
        ):
            await writer(event)
        news += writer.take_news()
    return news


def _worker(target: str, name: str, ready: Any) -> None:
    from mibyan_jupyter.store.backend import open_database
    from mibyan_jupyter.store.records import insert_session
    from mibyan_jupyter.store.writer import StoreWriter

    # The writer logs each failure and recovery (a SQLite file locked > patience); the
    # figure is the count of writers whose failure surfaced, one line each (below).
    logging.disable(logging.ERROR)
    db = open_database(target)
    writer = StoreWriter(db, insert_session(db, session_id=name, title="bench"))
    ready.wait(timeout=120)  # all 20 connected: the clock starts
    news = asyncio.run(_turns(writer, name))
    drained = writer.drain(timeout=60)
    news += writer.take_news()
    writer.close()
    db.close()
    if news or not drained:
        first = news[0][:160] if news else "not drained"
        print(f"{name}: {len(news)} store notices, drained={drained}: {first}", file=sys.stderr)
        sys.exit(SURFACED)


def run(target: str, count_rows: Any) -> dict[str, float | int]:
    """Seconds, rows lost (``count_rows(prefix)``: the database's own count of the message
    rows of sessions named ``prefix...``), writers whose failure surfaced, and writers that
    crashed."""
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(PROCESSES + 1)
    workers = [
        context.Process(target=_worker, args=(target, f"{PREFIX}{k}", ready))
        for k in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    ready.wait(timeout=120)
    started = time.perf_counter()
    for worker in workers:
        worker.join(timeout=300)
    seconds = time.perf_counter() - started
    codes = [worker.exitcode for worker in workers]
    return {
        "s": round(seconds, 2),
        "lost_rows": PROCESSES * TURNS * MESSAGES_PER_TURN - int(count_rows(PREFIX)),
        "surfaced": sum(code == SURFACED for code in codes),
        "crashed": sum(code not in (0, SURFACED) for code in codes),
    }
