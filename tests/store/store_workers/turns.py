"""One kernel's worth of short turns recorded by a StoreWriter, for the load test of the
team store (tests/pg/test_pg_store_processes.py).

Usage: ``turns.py DB TURNS``. Opens the store (a team store URL: its login role is this
process's user), creates a session of its own, prints ``ready <session id>``, waits for a
line on stdin (every worker starts at once), then runs TURNS prompts of one reply each
through the real Agent and StoreWriter (four write transactions a turn: running, the
prompt, the reply with its ledger row, idle). Ends with ``ok <seconds>`` and one ``news
<line>`` per line the writer had for the user; exit status 2 if the writer ended with an
error in effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from mibyan_jupyter.core import Agent, Reply, ScriptedModel
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.records import insert_session
from mibyan_jupyter.store.writer import StoreWriter


async def run(db: StoreDatabase, session_id: str, turns: int) -> int:
    model = ScriptedModel([Reply(text=f"answer {n}") for n in range(turns)], record=False)
    agent = Agent(stream_fn=model, model="fake:load")
    writer = StoreWriter(db, session_id)
    agent.subscribe(writer)
    began = time.perf_counter()
    for n in range(turns):
        await agent.prompt(f"question {n}")
    drained = writer.drain(timeout=60)
    print(f"ok {time.perf_counter() - began:.3f}", flush=True)
    for line in writer.take_news():
        print(f"news {line}", flush=True)
    return 0 if drained and writer.error is None else 2


def main() -> int:
    path, turns = sys.argv[1], int(sys.argv[2])
    with contextlib.closing(open_database(path)) as db:
        session_id = insert_session(db, title="load", model="fake:load")
        print(f"ready {session_id}", flush=True)
        sys.stdin.readline()
        return asyncio.run(run(db, session_id, turns))


if __name__ == "__main__":
    sys.exit(main())
