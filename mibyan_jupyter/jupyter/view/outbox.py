"""The kernel side of the view's wire: ops in order, in batches, few and full.

Why batches of ops over custom messages, never a synced trait: a trait set per token
re-sends the whole text each time (quadratic bytes, a lagging page: 99.5 MB measured for a
98 KB reply, see docs/architecture.md, "Streaming"). Here text deltas are appended to the pending batch (consecutive
deltas of one element are joined into one op) and sent by an adaptive throttle:

* never two timed flushes less than ``interval`` apart (at most 20 in any second, counted
  exactly: the clock is compared as a difference, with no slack);
* a timed flush goes when ``min_chars`` characters wait; else when the deltas waiting
  (those the flush would send whole, not a held-back tail) have waited ``lag`` on average,
  so the period adapts to the rate (about ``2 * lag`` however fast tokens come) and the
  mean token lag stays near ``lag`` at every rate; else ``max_delay`` after text last went
  out (so flowing text is shown at least every ``max_delay``, and after a quiet spell the
  first delta goes out at once). Each message costs ~43 bytes on top of its text (and ~480
  more of Jupyter's own envelope), so a slow stream sends fewer, fuller messages:
  bench/stream_wire.py measures the choice (384 characters, 0.22 s, 0.4 s). A timed flush
  with no text to send (all held back, see below) sends nothing: structural ops queued
  with ``now=False`` ride along with the next text;
* any other op (a tool card, an approval, a message's end) flushes as soon as the code that
  emits events yields to the loop, with everything pending before it, so the front end sees
  everything in the order it happened.

Timers run on the running asyncio loop; with no running loop the throttle is checked at
the next event (or at the next forced flush).

The wire, built for the hot path (a batch is JSON inside a Jupyter comm message):
``[seq, op, ...]``, where an op is one of

* a string: text appended to the element the previous delta went to (the common case: a
  reply streaming costs its text, two quotes and a comma);
* ``[kind, id, text]``: text appended to element ``id`` (``kind`` is "text", "thinking" or
  "args"), which becomes the target of the strings that follow;
* ``[chars, blocks]``: the Markdown blocks that the last target's text completed (a
  :class:`.ops.BlocksOp` for that element, in its short form: one comes every paragraph);
* an object ``{"op": name, ...}``: a structural op, readable (rarer, and not worth a code).

The ops are typed in :mod:`.ops`, mirrored for the front end in ``static/ops.d.ts``.

The target carries over from batch to batch: that is sound because every front end applies
every batch, in order, from ``seq`` 0 (it drops a batch that is not the next one). Custom
messages sent before the front end has loaded the view's module are lost, so the front end
says which ``seq`` it expects when it renders and :meth:`Outbox.replay` sends the batches
from there; the front end's target then is what it was when the kernel built that batch.

Markdown and secrets (a reply's text rendered as it goes; the tail of a delta stream held
back so that no flush cuts a key in two): :mod:`.delta_streams`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeAlias

from mibyan_jupyter.export.markdown_stream import MarkdownStream
from mibyan_jupyter.jupyter.view.delta_streams import DeltaStream, Waiting
from mibyan_jupyter.jupyter.view.ops import DeltaKind, StructuralOp
from mibyan_jupyter.secrets import REDACT

Batch: TypeAlias = list[Any]
"""``[seq, op, ...]`` where an op is a :data:`.ops.StructuralOp`, ``[kind, id, text]`` or a
string (``Batch`` in ``static/ops.d.ts``; items are JSON-ready copies, hence ``Any``)."""
StreamKey: TypeAlias = tuple[DeltaKind, str]
"""A delta stream: its kind and the id of its element."""
Send: TypeAlias = Callable[[Batch], None]
Cancel: TypeAlias = Callable[[], None]
Scheduler: TypeAlias = Callable[[float, Callable[[], None]], Cancel | None]
"""``schedule(delay, fn)`` runs ``fn`` later and returns a cancel function, or ``None``
when it cannot (no running loop): the outbox then flushes at the next event instead."""

INTERVAL = 0.05
MAX_DELAY = 0.4
MIN_CHARS = 384
LAG = 0.22
_TICK = 1e-6
"""The least delay of a timer set again because it fired a hair early (asyncio runs a
timer up to its clock's resolution early, and float sums land a hair short): the
throttle compares what its own clock says, so no two timed flushes are ever less than
``interval`` apart (docs/architecture.md, "Streaming")."""


def loop_scheduler(delay: float, fn: Callable[[], None]) -> Cancel | None:
    """One timer on the running asyncio loop; ``None`` outside a loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(delay, fn).cancel


class Outbox:
    """Ops for one widget, in order, batched and throttled (see the module's docstring)."""

    def __init__(
        self,
        send: Send,
        *,
        interval: float = INTERVAL,
        max_delay: float = MAX_DELAY,
        min_chars: int = MIN_CHARS,
        lag: float = LAG,
        clock: Callable[[], float] = time.monotonic,
        schedule: Scheduler = loop_scheduler,
    ) -> None:
        self._send = send
        self.interval = interval
        self.max_delay = max(max_delay, interval)
        self.min_chars = min_chars
        self.lag = lag
        self._waiting = Waiting()
        """The deltas the next flush would send whole, and when they arrived."""
        self.clock = clock
        self.schedule = schedule
        self._pending: list[StructuralOp | StreamKey] = []
        """Ops, and (kind, id) keys of delta streams, in the order they happened."""
        self._pending_chars = 0
        """Characters of deltas added since the last flush."""
        self._streams: dict[StreamKey, DeltaStream] = {}
        self._target: StreamKey | None = None
        """The delta stream that a string op appends to, as the front end sees it."""
        self._sent: list[Batch] = []
        self._last_text = -float("inf")
        """When a message last carried streamed text: the throttle counts from there, so
        the first text after a structural op (which flushes at once) is not kept waiting."""
        self._cancel_timer: Cancel | None = None
        self._timer_due = float("inf")
        self._soon_scheduled = False
        self._lock = threading.RLock()
        self.closed = False

    # -- adding ---------------------------------------------------------------------------

    def add(self, op: StructuralOp, *, now: bool = True) -> None:
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

    def delta(self, kind: DeltaKind, ident: str, text: str) -> None:
        """Append streamed ``text`` to element ``ident`` (op ``kind``): sent throttled."""
        if not text:
            return
        with self._lock:
            key = (kind, ident)
            stream = self._streams.get(key)
            if stream is None:
                markdown = MarkdownStream() if kind == "text" else None
                stream = self._streams[key] = DeltaStream(markdown=markdown)
            elif stream.ended and not stream.held:
                stream.ended = False  # the element streams again (a second text block)
            if not self._pending or self._pending[-1] != key:
                self._pending.append(key)
            stream.parts.append(text)
            self._pending_chars += len(text)
            self._waiting.arrived(stream, text, self.clock())
            self._throttle()

    def end_stream(self, kind: DeltaKind, ident: str) -> None:
        """The stream is complete: its held-back tail goes out with the next flush."""
        with self._lock:
            stream = self._streams.get((kind, ident))
            if stream is None:
                return
            stream.ended = True
            self._waiting.make_ready(stream, len(stream.waiting))  # nothing is held back now
            unrendered = stream.markdown is not None and stream.markdown.open_text
            if (stream.held or unrendered) and (kind, ident) not in self._pending:
                self._pending.append((kind, ident))

    def discard(self, kind: DeltaKind, ident: str) -> None:
        """Forget what is pending or held of a stream (a reply that starts over)."""
        with self._lock:
            stream = self._streams.pop((kind, ident), None)
            if stream is not None:
                stream.held.clear()
                self._waiting.sent_out(stream)  # its deltas wait no more
            self._pending = [item for item in self._pending if item != (kind, ident)]

    # -- sending --------------------------------------------------------------------------

    def flush(self) -> None:
        """Send everything pending now (held-back tails of open streams stay held)."""
        with self._lock:
            self._flush()

    def _throttle(self) -> None:
        """Flush now if due, else make sure one timer fires when it is due. Waits are
        compared as differences of the clock, never with a slack, so no two timed flushes
        are less than ``interval`` apart (21 never fit in one second)."""
        now = self.clock()
        due = self._due()
        if now - self._last_text >= self.interval and now >= due:
            self._flush(timed=True)
            return
        due = max(due, self._last_text + self.interval)
        if due < self._timer_due:  # no timer yet, or one set before the text grew
            if self._cancel_timer is not None:
                self._cancel_timer()
            self._cancel_timer = self.schedule(max(due - now, _TICK), self._timer)
            self._timer_due = due if self._cancel_timer is not None else float("inf")

    def _due(self) -> float:
        """When the pending text should go: at once when ``min_chars`` wait; else when
        the deltas waiting have waited ``lag`` on average (so the period adapts to the
        rate: about ``2 * lag`` however fast tokens come, and fewer, fuller messages
        for the same mean lag), or ``max_delay`` after text last went out (after a
        quiet spell, that is now)."""
        if self._pending_chars >= self.min_chars:
            return -float("inf")
        by_gap = self._last_text + self.max_delay
        mean = self._waiting.mean_arrival()
        return by_gap if mean is None else min(by_gap, mean + self.lag)

    def _timer(self) -> None:
        """The timer fired: flush if due now (else it is set again for what is left)."""
        with self._lock:
            self._cancel_timer = None
            self._timer_due = float("inf")
            self._throttle()

    def _flush(self, *, timed: bool = False) -> None:
        """Send what is pending. A ``timed`` flush (the throttle's) sends only if it has
        text to send (not all held back): else the structural ops queued with ``now=False``
        wait for the text or a forced flush, and no message is spent on them."""
        if self._cancel_timer is not None:
            self._cancel_timer()
            self._cancel_timer = None
            self._timer_due = float("inf")
        self._pending_chars = 0
        if not self._pending or self.closed:
            return
        batch: Batch = [len(self._sent)]
        texts = 0
        for item in self._pending:
            if not isinstance(item, tuple):
                batch.append(REDACT.scrub(item))
                continue
            stream = self._streams.get(item)
            text = REDACT(stream.take()) if stream is not None else ""
            if stream is not None:
                self._waiting.sent_out(stream)
            if text:
                batch.append(text if item == self._target else [item[0], item[1], text])
                self._target = item
                texts += 1
            if stream is not None and stream.markdown is not None:
                rendered = stream.blocks(item[1], text)
                short = item == self._target  # the front end knows which element
                batch.extend([op["chars"], op["blocks"]] if short else op for op in rendered)
                texts += len(rendered)  # sent even by a timed flush: the renderer moved on
        if timed and not texts:  # only structural ops: they wait (see the docstring)
            self._pending = [item for item in self._pending if not isinstance(item, tuple)]
            return
        self._pending = []
        if len(batch) == 1:
            return
        self._sent.append(batch)
        if texts:
            self._last_text = self.clock()
        self._send(batch)

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
