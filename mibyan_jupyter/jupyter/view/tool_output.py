"""A running tool's output to its card: batched, throttled, redacted, capped.

Why a pump of its own next to the outbox: ``run_python`` prints while it blocks the kernel's
event loop, so neither the loop's events nor the outbox's loop timers run until it returns
(docs/architecture.md, "Streaming"). Writes come from any thread (the code's own, the fd
readers); a timer *thread* flushes them as ``tool_output`` ops through the outbox, which is
thread-safe and sends at once from a thread without a loop. The rules are the text stream's:

* at most one flush per ``interval`` (20 a second), one message for everything pending;
* secrets: each flush is redacted, and the trailing run of non-space characters of each
  stream is held back until a space, a newline or the call's end comes (a key printed in
  two writes is never sent in two halves; a run longer than ``HOLD_LIMIT`` is sent but its
  last ``HOLD_LIMIT`` characters);
* ``limit`` characters per call at most (a print loop must not flood the page; the result
  has what the tool kept), then one line saying so.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Literal

from mibyan_jupyter.jupyter.view.ops import StructuralOp, ToolOutputOp
from mibyan_jupyter.secrets import REDACT

Stream = Literal["stdout", "stderr"]
Key = tuple[str, Stream]

INTERVAL = 0.05
LIVE_LIMIT = 200_000
"""Characters of live output per call (the stored output's limit, ``capture.STORED_LIMIT``)."""
HOLD_LIMIT = 512
_SPACE = re.compile(r"\s")
CUT_NOTE = "\n[live output stops here; the tool's result shows what it kept]\n"


class ToolOutputPump:
    """``write(call_id, stream, text)`` from any thread; ``end(call_id)`` at the call's end."""

    def __init__(
        self,
        add: Callable[[StructuralOp], None],
        flush: Callable[[], None],
        *,
        interval: float = INTERVAL,
        limit: int = LIVE_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._add = add
        self._flush_outbox = flush
        self.interval = interval
        self.limit = limit
        self._clock = clock
        self._lock = threading.RLock()
        self._pending: dict[Key, list[str]] = {}
        self._held: dict[Key, str] = {}
        self._sent: dict[str, int] = {}
        self._ended: set[str] = set()
        self._timer: threading.Timer | None = None
        self._last = -float("inf")
        self.flushes = 0
        self.closed = False

    def write(self, call_id: str, stream: Stream, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self.closed or call_id in self._ended or self._sent.get(call_id, 0) >= self.limit:
                return  # a background child writing after its call ended, or over the cap
            self._pending.setdefault((call_id, stream), []).append(text)
            if self._timer is None:
                delay = max(0.0, self._last + self.interval - self._clock())
                self._timer = threading.Timer(delay, self._timed)
                self._timer.daemon = True
                self._timer.start()

    def end(self, call_id: str) -> None:
        """The call ended: queue what it printed last (held tails too) before its result.
        Queued only: the result op that follows sends it in the same message."""
        with self._lock:
            keys = {k for k in self._pending if k[0] == call_id}
            keys |= {k for k in self._held if k[0] == call_id}
            for key in sorted(keys):
                self._queue(key, final=True)
            self._ended.add(call_id)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _timed(self) -> None:
        with self._lock:
            self._timer = None
            if self.closed:
                return
            queued = [self._queue(key, final=False) for key in list(self._pending)]
            self._last = self._clock()
        if any(queued):
            self.flushes += 1
            self._flush_outbox()
            with self._lock:  # the next flush counts from this one's send (a send the GIL
                self._last = self._clock()  # delayed must not make the next one early)

    def _queue(self, key: Key, *, final: bool) -> bool:
        """Add the op of ``key``'s text due now to the outbox (not sent yet)."""
        text = self._held.pop(key, "") + "".join(self._pending.pop(key, []))
        if not final:
            cut = _after_last_space(text)
            cut = max(cut, len(text) - HOLD_LIMIT)
            text, self._held[key] = text[:cut], text[cut:]
            if not self._held[key]:
                del self._held[key]
        return bool(text) and self._send(key, text)

    def _send(self, key: Key, text: str) -> bool:
        call_id, stream = key
        sent = self._sent.get(call_id, 0)
        if sent >= self.limit:
            return False
        text = REDACT(text)
        if sent + len(text) > self.limit:
            text = text[: self.limit - sent] + CUT_NOTE
        self._sent[call_id] = sent + len(text)
        self._add(ToolOutputOp(op="tool_output", id=call_id, stream=stream, text=text))
        return True


def _after_last_space(text: str) -> int:
    """Index just after the last whitespace character of ``text`` (0 if none)."""
    match = _SPACE.search(text[::-1])
    return 0 if match is None else len(text) - match.start()
