"""The MCP sessions' own thread and event loop (docs/architecture.md, "Tools from outside").

Why a thread of its own: the SDK's clients hold anyio task groups, which must be exited in
the task that entered them, while every ``%%agent`` cell runs in a new task of the kernel's
loop and ipykernel 7 stops running asyncio tasks between cells (ipykernel #1510). A server's
session opened in one cell's task would be torn down, or left unclosable, when that cell
ends. So one daemon thread per kernel runs its own asyncio loop for as long as the kernel
lives; each server's session lives in one long-lived task there (entered and exited in that
task), and callers hand coroutines over with :func:`asyncio.run_coroutine_threadsafe`.

:meth:`Runner.run` is the agent's side: it awaits the handed-over coroutine through
:func:`asyncio.wrap_future`, so the kernel's loop never blocks, and cancelling the awaiting
task (Stop, Interrupt) cancels the coroutine on the runner's loop. :meth:`Runner.run_sync`
is for callers that are not on a loop (a line magic, the kernel's shutdown hook).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Runner:
    """One daemon thread with one asyncio loop, started on first use."""

    def __init__(self, name: str = "mibyan-mcp") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The runner's loop (the thread starts here, once)."""
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                self._start()
            assert self._loop is not None
            return self._loop

    @property
    def started(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def in_runner(self) -> bool:
        """Whether the calling code runs on the runner's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.close()

        thread = threading.Thread(target=main, name=self._name, daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the runner's loop; the future is thread-safe."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the runner's loop from the caller's loop. Cancelling the
        caller cancels ``coro`` (``wrap_future`` passes the cancel on)."""
        if self.in_runner():
            return await coro
        future = self.submit(coro)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the runner's loop and block until it is done (``timeout``
        seconds at most: then it is cancelled and ``TimeoutError`` raised). Never call it
        from the runner's own thread: that would wait for itself."""
        if self.in_runner():
            coro.close()
            raise RuntimeError("Runner.run_sync called from the runner's own thread")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the MCP runner did not finish within {timeout} s") from None

    def close(self, timeout: float = 2.0) -> None:
        """Stop the loop and join the thread (what is still running there is dropped)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        if threading.current_thread() is not thread:
            thread.join(timeout)
