"""A cancellation signal that works across threads and wakes the loop at once.

Why not a bare ``asyncio.Event``: ``abort()`` is called from widget callbacks that may run
on another thread, and sync tools run in worker threads that need to poll it. The signal
therefore keeps a ``threading.Event`` (readable anywhere) and, when the loop has entered an
interruptible phase (a model stream or a tool batch), cancels that phase's task through
``call_soon_threadsafe`` so a blocked network read or ``await`` ends immediately.

The run machinery (``core/_run``) talks to the signal through two methods meant for it
alone: ``with signal.interruptible(): ...`` around a phase that an abort may cancel, and
``signal.absorb_cancel()`` where that phase catches the ``CancelledError``. Tools, hooks and
providers only read ``aborted`` / ``reason``, wait on it, or listen to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any


class AbortSignal:
    """Set once; ``reason`` says why. Listeners run on the thread that aborts."""

    __slots__ = ("_cancel_sent", "_event", "_listeners", "_lock", "_loop", "_task", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancel_sent = False
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: str = "aborted by the user") -> None:
        """Idempotent and thread-safe."""
        self._set(reason, interrupt=True)

    def _set(self, reason: str, *, interrupt: bool) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            listeners = list(self._listeners)
            self._listeners.clear()
            loop, task = self._loop, self._task
        if interrupt and loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._interrupt, task)
        for listener in listeners:
            listener()

    def _interrupt(self, task: asyncio.Task[Any]) -> None:
        """On the loop's thread: cancel ``task`` if it is still inside its phase, so the
        CancelledError lands where the phase handles it and nowhere else."""
        with self._lock:
            inside = self._task is task
        if inside and not task.done():
            self._cancel_sent = True
            task.cancel()

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` on abort (at once if already aborted); returns a remover."""
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(listener)
                return lambda: self._remove(listener)
        listener()
        return lambda: None

    def _remove(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block a worker thread until aborted or ``timeout``; returns ``aborted``."""
        return self._event.wait(timeout)

    async def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, returning early (``True``) when aborted."""
        if self.aborted:
            return True
        loop = asyncio.get_running_loop()
        woken = loop.create_future()

        def resolve() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(resolve)

        remove = self.add_listener(wake)
        try:
            await asyncio.wait({woken}, timeout=seconds)
        finally:
            remove()
        return self.aborted

    # -- for the run machinery only (core/_run) ----------------------------------------

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Mark the current task as inside an interruptible phase (a model stream or a tool
        batch) while the block runs, so ``abort()`` cancels it; loop thread only. The
        phase itself must catch the ``CancelledError`` and call :meth:`absorb_cancel`."""
        task = asyncio.current_task()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._task = task
        try:
            yield
        finally:
            with self._lock:
                self._task = None

    def absorb_cancel(self) -> bool:
        """Called where an interruptible phase caught CancelledError. Returns ``True`` if
        this signal sent it (an abort: the cancellation is consumed), ``False`` for an
        external cancellation, which also marks the signal aborted so the rest of the run
        stops."""
        if self._cancel_sent:
            self._cancel_sent = False
            task = asyncio.current_task()
            uncancel = getattr(task, "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()
            return True
        self._set("cancelled", interrupt=False)
        return False
