"""The kernel's live line from running tools to the cell's view, and its Stop line back.

Why not only ``on_update`` events: ``run_python`` runs synchronously on the kernel's event
loop thread, and events reach the view through that loop, so nothing a blocking call prints
could be shown until it returned. What a tool prints therefore goes to :data:`LIVE`, which
any thread may call; the cell's run attaches the view's thread-safe, throttled sink to it
for the run (docs/architecture.md, "Streaming"). With nothing attached (the plain Python
API) writes are dropped.

Stop has the same problem the other way round: the click reaches the kernel on a kernel
subshell's thread (JupyterLab 4.6 sends widget comms over subshells, ipykernel 7 serves them
on their own threads), but the run's loop is the blocked thread. :data:`STOPS` lets the click
interrupt the blocking code itself: ``request_stop`` marks the stop and sends SIGINT to the
main thread only while code runs inside :meth:`StopLine.blocking`, and the tool, seeing the
mark, ends as "stopped" instead of as Kernel > Interrupt.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Literal

Sink = Callable[[str, Literal["stdout", "stderr"], str], None]
"""``sink(call_id, stream, text)``: text a running tool printed (raw: the sink redacts)."""

ABSORB_S = 0.05
"""How long the end of a blocking block waits for a Stop's SIGINT still on its way."""


class LiveOutput:
    """The one sink tool output goes to while a cell runs (thread-safe)."""

    def __init__(self) -> None:
        self._sink: Sink | None = None
        self._lock = threading.Lock()

    def attach(self, sink: Sink) -> Callable[[], None]:
        """Send tool output to ``sink`` until the returned function is called."""
        with self._lock:
            self._sink = sink

        def detach() -> None:
            with self._lock:
                if self._sink is sink:
                    self._sink = None

        return detach

    def write(self, call_id: str, stream: Literal["stdout", "stderr"], text: str) -> None:
        sink = self._sink
        if sink is not None and text:
            sink(call_id, stream, text)

    def writer(self, call_id: str) -> Callable[[Literal["stdout", "stderr"], str], None] | None:
        """``write`` bound to one call, straight to the sink attached now (``None``: none);
        the hot path of a print loop, one call per write."""
        sink = self._sink
        return None if sink is None else functools.partial(sink, call_id)


class StopLine:
    """Stop clicks for code that blocks the main thread (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocking = False
        self._stop_sent = False
        self.interrupts = 0
        """Kernel > Interrupts that stopped a tool; the cell's run takes them (Run All must
        stop even though the tool turned the interrupt into a result)."""

    @contextmanager
    def blocking(self) -> Iterator[None]:
        """Code in the block may be stopped by :meth:`request_stop` (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        with self._lock:
            self._blocking, self._stop_sent = True, False
        try:
            yield
        finally:
            with self._lock:
                self._blocking = False
                sent = self._stop_sent
            if sent:
                _absorb_pending_interrupt()

    def request_stop(self) -> bool:
        """From any thread: interrupt blocking code now; ``True`` when there was some."""
        with self._lock:
            if not self._blocking or self._stop_sent:
                return False
            self._stop_sent = True
            main = threading.main_thread().ident
        if main is None:
            return False
        signal.pthread_kill(main, signal.SIGINT)
        return True

    def stopping(self) -> bool:
        """Whether the interrupt the block is seeing came from Stop (not Kernel > Interrupt)."""
        with self._lock:
            return self._stop_sent

    def count_interrupt(self) -> None:
        with self._lock:
            self.interrupts += 1

    def take_interrupts(self) -> int:
        with self._lock:
            count, self.interrupts = self.interrupts, 0
            return count


def _absorb_pending_interrupt() -> None:
    """A Stop's SIGINT may still be pending when the code ended on its own: let it land
    here (SIGINT still raises KeyboardInterrupt inside the tool) rather than in ipykernel's
    handler, which would cancel the cell as an Interrupt."""
    with suppress(KeyboardInterrupt):
        time.sleep(ABSORB_S)


LIVE = LiveOutput()
STOPS = StopLine()
