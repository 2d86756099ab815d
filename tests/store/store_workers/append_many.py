"""Append many messages to a shared database as fast as possible, from one process.

Usage: ``append_many.py DB WORKER COUNT OWN_SESSION [SHARED_SESSION]``. Prints ``ready``,
waits for a line on stdin (so every worker starts at once), then appends COUNT messages,
alternating between its own session and the shared one when given. Any exception at all
(``database is locked`` included) is printed as ``error ...`` with exit status 1; success
prints ``ok <count> <seconds> <slowest append in ms>``.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback

from mibyan_jupyter.core.messages import AssistantMessage, Message, UserMessage
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.records import append_message


def message(worker: int, number: int) -> Message:
    text = f"worker {worker} message {number}"
    return UserMessage(content=text) if number % 2 == 0 else AssistantMessage(content=text)


def main() -> int:
    path, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sessions = sys.argv[4:]
    try:
        with contextlib.closing(open_database(path)) as db:  # a file or a team store URL
            print("ready", flush=True)
            sys.stdin.readline()
            began = slowest = time.perf_counter()
            slowest = 0.0
            for number in range(count):
                start = time.perf_counter()
                append_message(db, sessions[number % len(sessions)], message(worker, number))
                slowest = max(slowest, time.perf_counter() - start)
            elapsed = time.perf_counter() - began
    except BaseException:
        print("error " + traceback.format_exc().replace("\n", " | "), flush=True)
        return 1
    print(f"ok {count} {elapsed:.3f} {slowest * 1000:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
