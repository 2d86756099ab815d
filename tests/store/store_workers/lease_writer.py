"""A kernel-like process that leases a session and writes messages to it, one by one.

Usage: ``lease_writer.py DB SESSION_ID NAME COUNT [take_over] [running]``. Acquires the
session's lease (taking an idle holder's over with ``take_over``; marks the session running
first with ``running``, as a run in progress would), prints ``ready`` and waits for a line on
stdin, then writes COUNT user messages ``NAME 0``, ``NAME 1``... through a fenced
StoreWriter, printing ``wrote <i>`` after each one is durable. The first write refused
because another process took the lease prints ``lost <message>`` and ends the loop; a
lease it could not get prints ``held <holder>``. Ends with ``end``. The heartbeat interval
comes from ``MIBYAN_LEASE_HEARTBEAT_S`` as in a kernel.
"""

from __future__ import annotations

import asyncio
import sys

from mibyan_jupyter.core.events import AgentStart, MessageEnd
from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.lease import Lease, LeaseKeeper
from mibyan_jupyter.store.writer import StoreWriter


async def write(db: StoreDatabase, lease: Lease, name: str, count: int, running: bool) -> None:
    writer = StoreWriter(db, lease.session_id, fence=lease.fence)
    if running:
        await writer(AgentStart())
    for number in range(count):
        await writer(MessageEnd(message=UserMessage(content=f"{name} {number}")))
        writer.drain(timeout=10)
        if writer.stopped is not None:
            print(f"lost {writer.stopped}", flush=True)
            return
        print(f"wrote {number}", flush=True)
        await asyncio.sleep(0.02)


def main() -> int:
    path, session_id, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    flags = set(sys.argv[5:])
    keeper = LeaseKeeper(path)
    try:
        got = keeper.acquire(session_id, take_over="take_over" in flags)
        if not isinstance(got, Lease):
            print(f"held {got.describe()} busy={got.busy}", flush=True)
            return 0
        db = open_database(path)  # a SQLite file or a team store URL: a pool of its own
        try:
            print("ready", flush=True)
            sys.stdin.readline()
            asyncio.run(write(db, got, name, count, "running" in flags))
        finally:
            db.close()
    finally:
        print("end", flush=True)
        keeper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
