"""Running a coroutine to completion from sync code: the bridge under ``Agent.chat``.

Hermes users call ``chat`` / ``run_conversation`` from plain scripts, so each has a sync
form (docs/architecture.md, "Decisions"). Called from code that already runs an event loop
(a notebook cell, an async app), the sync form cannot nest ``asyncio.run``: it runs the
coroutine on a private loop in a worker thread and blocks until it is done. Async code
should prefer ``achat`` / ``arun_conversation``, which run on the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, whether or not a loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}
    # The worker runs in a copy of this context, so context variables set by the caller
    # (e.g. the kernel's current parent message, which routes output to the right cell)
    # hold inside the coroutine too.
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, coro)
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error

    worker = threading.Thread(target=target, name="mibyan-sync", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


async def closing_loop_resources(stream_fn: object, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro``, then let the stream function release what it holds for this event
    loop (a provider's pooled connections): the sync facade runs each call on a loop of
    its own, which is closed right after."""
    try:
        return await coro
    finally:
        close = getattr(stream_fn, "aclose", None)
        if close is not None:
            await close()
