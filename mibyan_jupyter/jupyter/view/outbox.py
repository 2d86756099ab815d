"""The kernel side of the view's wire: ops in order, in batches, at most ~20 a second.

Why batches of ops over custom messages, never a synced trait: a trait set per token
re-sends the whole text each time (quadratic bytes, a lagging page; DESIGN.md measured 99.5
MB for a 98 KB reply). Here a text delta is appended to the pending batch (consecutive
deltas of the same element are joined into one op) and the batch goes out at most once per
``interval``: at the leading edge when the stream has been quiet, else from one timer on the
running asyncio loop (with no running loop, at the next event after the interval, or at the
next forced flush). Any other op (a tool card, an approval, a message's final HTML) forces a
flush, so the front end sees everything in the order it happened.

Every batch is ``{"seq": n, "ops": [...]}`` and is kept: custom messages sent before the
front end has loaded the view's module are lost, so the front end says which ``seq`` it
expects when it renders and :meth:`Outbox.replay` sends the batches from there (it drops any
batch that is not the next one, so a replay never applies twice).

Secrets: every string is redacted before it is sent. A key streamed in pieces would be cut
by a flush and reach the page in two halves that no redaction matches, so a timed flush
holds back the trailing run of non-space characters of each delta stream (keys contain no
spaces) until a space or the end of that stream arrives; ops address elements by id, so a
tail sent after a later op still lands where it belongs.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from mibyan_jupyter.secrets import REDACT

Op: TypeAlias = dict[str, Any]
Send: TypeAlias = Callable[[Op], None]
Cancel: TypeAlias = Callable[[], None]
Scheduler: TypeAlias = Callable[[float, Callable[[], None]], Cancel | None]
"""``schedule(delay, fn)`` runs ``fn`` later and returns a cancel function, or ``None``
when it cannot (no running loop): the outbox then flushes at the next event instead."""

_SPACE = re.compile(r"\s")


def loop_scheduler(delay: float, fn: Callable[[], None]) -> Cancel | None:
    """One timer on the running asyncio loop; ``None`` outside a loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(delay, fn).cancel


@dataclass(slots=True)
class _Stream:
    """One element's streamed text (an assistant text, its thinking, a call's arguments)."""

    parts: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    """The held-back tail: text after the last space sent (a list, so a long run without
    spaces is not copied at every flush)."""
    ended: bool = False


class Outbox:
    """Ops for one widget, in order, batched and throttled (see the module's docstring)."""

    def __init__(
        self,
        send: Send,
        *,
        interval: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        schedule: Scheduler = loop_scheduler,
    ) -> None:
        self._send = send
        self.interval = interval
        self.clock = clock
        self.schedule = schedule
        self._pending: list[Op | tuple[str, str]] = []
        """Ops, and (kind, id) keys of delta streams, in the order they happened."""
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._sent: list[Op] = []
        self._last_flush = -float("inf")
        self._cancel_timer: Cancel | None = None
        self._soon_scheduled = False
        self._lock = threading.RLock()
        self.closed = False

    # -- adding ---------------------------------------------------------------------------

    def add(self, op: Op, *, now: bool = True) -> None:
        """Queue a structural op. ``now`` (the default): flush it, with everything pending
        before it, as soon as the code that emits events yields to the loop (so the ops of
        one burst of events share a message), or at once when there is no running loop on
        this thread."""
        with self._lock:
            self._pending.append(op)
            if now and not self._soon_scheduled:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    self._flush()
                else:
                    self._soon_scheduled = True
                    loop.call_soon(self._soon)

    def _soon(self) -> None:
        with self._lock:
            self._soon_scheduled = False
            self._flush()

    def delta(self, kind: str, ident: str, text: str) -> None:
        """Append streamed ``text`` to element ``ident`` (op ``kind``): sent throttled."""
        if not text:
            return
        with self._lock:
            key = (kind, ident)
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = _Stream()
            elif stream.ended and not stream.held:
                stream.ended = False  # the element streams again (a second text block)
            if not self._pending or self._pending[-1] != key:
                self._pending.append(key)
            stream.parts.append(text)
            self._throttle()

    def end_stream(self, kind: str, ident: str) -> None:
        """The stream is complete: its held-back tail goes out with the next flush."""
        with self._lock:
            stream = self._streams.get((kind, ident))
            if stream is None:
                return
            stream.ended = True
            if stream.held and (kind, ident) not in self._pending:
                self._pending.append((kind, ident))

    def discard(self, kind: str, ident: str) -> None:
        """Forget what is pending or held of a stream (a reply that starts over)."""
        with self._lock:
            self._streams.pop((kind, ident), None)
            self._pending = [item for item in self._pending if item != (kind, ident)]

    # -- sending --------------------------------------------------------------------------

    def flush(self) -> None:
        """Send everything pending now (held-back tails of open streams stay held)."""
        with self._lock:
            self._flush()

    def _throttle(self) -> None:
        if self._cancel_timer is not None:
            return
        wait = self._last_flush + self.interval - self.clock()
        if wait <= 1e-6:  # due (a float sum like 0.02 + 0.05 may land a hair past 0.07)
            self._flush()
        else:
            self._cancel_timer = self.schedule(wait, self._timer)

    def _timer(self) -> None:
        with self._lock:
            self._cancel_timer = None
            self._flush()

    def _flush(self) -> None:
        if self._cancel_timer is not None:
            self._cancel_timer()
            self._cancel_timer = None
        if not self._pending or self.closed:
            return
        ops: list[Op] = []
        for item in self._pending:
            if isinstance(item, dict):
                ops.append(REDACT.scrub(item))
            else:
                stream = self._streams.get(item)
                text = self._take(stream) if stream is not None else ""
                if text:
                    ops.append({"op": item[0], "id": item[1], "text": REDACT(text)})
        self._pending = []
        if not ops:
            return
        batch: Op = {"seq": len(self._sent), "ops": ops}
        self._sent.append(batch)
        self._last_flush = self.clock()
        self._send(batch)

    @staticmethod
    def _take(stream: _Stream) -> str:
        """The text of ``stream`` to send now; keeps back what follows its last space
        until the stream ends."""
        new = "".join(stream.parts)
        stream.parts.clear()
        if stream.ended:
            text = "".join(stream.held) + new
            stream.held.clear()
            return text
        cut = _after_last_space(new)
        if cut == 0:
            stream.held.append(new)
            return ""
        text = "".join(stream.held) + new[:cut]
        stream.held[:] = [new[cut:]] if cut < len(new) else []
        return text

    def replay(self, first: int) -> int:
        """Send again the batches from ``first`` on; returns how many."""
        with self._lock:
            if self.closed:
                return 0
            again = self._sent[max(first, 0) :]
            for batch in again:
                self._send(batch)
            return len(again)

    def close(self) -> None:
        """End every stream, flush, then send nothing more (the widget is gone) and forget
        the batches."""
        with self._lock:
            for key in list(self._streams):
                self.end_stream(*key)
            self._flush()
            self.closed = True
            self._sent.clear()
            self._streams.clear()


def _after_last_space(text: str) -> int:
    """Index just after the last whitespace character of ``text`` (0 if none)."""
    match = _SPACE.search(text[::-1])
    return 0 if match is None else len(text) - match.start()
