"""Kernel > Interrupt while a tool runs synchronously on the kernel's event loop thread.

While an async cell (the ``%%agent`` cell) runs, ipykernel replaces the SIGINT handler with
one that only *schedules* the cancellation of the cell on the event loop. Code running
synchronously on that loop (``run_python``, a slow repr in ``describe_variable``) would never
see it: an agent's ``while True: pass`` could not be interrupted. So for the duration of
such a tool, SIGINT raises ``KeyboardInterrupt`` again, as in an ordinary cell; the tool
stops, returns an error result (the transcript stays valid) and reports the interrupt:
to ``on_interrupt`` when the caller gave one (it cancels the run), else to the handler that
was replaced (ipykernel's, which cancels the cell as usual). Either way the interrupt is
counted on :data:`.live.STOPS`, so the cell ends with its red line and Run All stops.

Stop during such a tool arrives as the same SIGINT (sent by :meth:`.live.StopLine.request_stop`
from the click's thread); :func:`stopped` is its result, and the run ends "stopped".
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.core.tools import ToolResult
from mibyan_jupyter.jupyter.kernel_tools.live import STOPS

INTERRUPTED = (
    "Interrupted by the user (Kernel > Interrupt): the tool was stopped before it finished."
)
STOPPED = "Stopped by the user (the Stop button): the tool was stopped before it finished."


@dataclass
class Replaced:
    """The SIGINT handler in force before :func:`interruptible` (``None``: not replaced)."""

    handler: Any = None


@contextmanager
def interruptible() -> Iterator[Replaced]:
    """SIGINT raises ``KeyboardInterrupt`` inside the block (main thread only: elsewhere
    signal handlers cannot be set, and SIGINT never lands there anyway)."""
    replaced = Replaced()
    if threading.current_thread() is not threading.main_thread():
        yield replaced
        return
    replaced.handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield replaced
    finally:
        signal.signal(signal.SIGINT, replaced.handler)


def report(on_interrupt: Callable[[], None] | None, replaced: Replaced) -> None:
    """Tell whoever should stop the run that the user interrupted."""
    STOPS.count_interrupt()
    if on_interrupt is not None:
        on_interrupt()
    elif callable(replaced.handler) and replaced.handler is not signal.default_int_handler:
        replaced.handler(signal.SIGINT, None)


def report_after_result(on_interrupt: Callable[[], None] | None, replaced: Replaced) -> None:
    """:func:`report`, with ``on_interrupt`` called on the loop's next turn rather than
    now. ``on_interrupt`` aborts the run, and an abort cancels the tool batch at its next
    ``await``: called from inside the tool, that lands while the loop finishes the call
    (its updates are flushed with an ``await``), so the batch records "cancelled" and the
    model never sees what the code printed. Deferred, the loop takes the returned result
    first (it records it before the call's End is emitted) and the abort then stops the
    run as before. Without a running loop (the tool called directly) it is called now."""
    if on_interrupt is None:
        report(None, replaced)
        return
    STOPS.count_interrupt()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        on_interrupt()
        return
    loop.call_soon(on_interrupt)


def interrupted(
    on_interrupt: Callable[[], None] | None, replaced: Replaced, **details: object
) -> ToolResult:
    """Report the interrupt and make the tool's error result."""
    report(on_interrupt, replaced)
    return ToolResult(content=INTERRUPTED, details=details or None, is_error=True)


def stopped(**details: object) -> ToolResult:
    """The result of a tool the Stop button ended (the run itself is aborted by Stop)."""
    return ToolResult(content=STOPPED, details={**details, "stopped": True}, is_error=True)
