"""The kernel side of the view's wire: ops in order, in batches, few and full.

Why batches of ops over custom messages, never a synced trait: a trait set per token
re-sends the whole text each time (quadratic bytes, a lagging page: 99.5 MB measured for a
98 KB reply, see docs/architecture.md, "Streaming"). Here text deltas are appended to the pending batch (consecutive
deltas of one element are joined into one op) and sent by an adaptive throttle:

* never two timed flushes less than ``interval`` apart (at most 20 a second);
* a timed flush waits until ``min_chars`` characters are pending, or until ``max_delay``
  has passed since text last went out (so text that flows is shown at least 4 times a
  second, and after a quiet spell the first delta goes out at once). Each message costs
  ~40 bytes on top of its text (and ~480 more of Jupyter's own envelope), so a slow stream
  sends fewer, fuller messages: bench/stream_wire.py measures the choice of 128 characters
  and 0.25 s. A timed flush with no text to send (all held back, see below) sends nothing:
  structural ops queued with ``now=False`` ride along with the next text;
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

Markdown: a reply's text (kind "text") is also rendered as it goes. Each piece of it sent
is fed to a :class:`~mibyan_jupyter.export.markdown_stream.MarkdownStream`, and when blocks
complete a :class:`.ops.BlocksOp` follows the text in the same batch; its ranges index the
text exactly as sent (redacted, cut where the hold-back below cut it), which is what the
front end has. The stream's end renders the open block too.

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

from mibyan_jupyter.export.markdown_stream import MarkdownStream
from mibyan_jupyter.jupyter.view.ops import BlocksOp, DeltaKind, StructuralOp
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
MAX_DELAY = 0.25
MIN_CHARS = 128
_SPACE = re.compile(r"\s")
_EARLY = 1e-6
"""Slack for float sums: 0.02 + 0.05 may land a hair past 0.07."""


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
    markdown: MarkdownStream | None = None
    """A reply's text only: its blocks, rendered as they complete."""


class Outbox:
    """Ops for one widget, in order, batched and throttled (see the module's docstring)."""

    def __init__(
        self,
        send: Send,
        *,
        interval: float = INTERVAL,
        max_delay: float = MAX_DELAY,
        min_chars: int = MIN_CHARS,
        clock: Callable[[], float] = time.monotonic,
        schedule: Scheduler = loop_scheduler,
    ) -> None:
        self._send = send
        self.interval = interval
        self.max_delay = max(max_delay, interval)
        self.min_chars = min_chars
        self.clock = clock
        self.schedule = schedule
        self._pending: list[StructuralOp | StreamKey] = []
        """Ops, and (kind, id) keys of delta streams, in the order they happened."""
        self._pending_chars = 0
        """Characters of deltas added since the last flush."""
        self._streams: dict[StreamKey, _Stream] = {}
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
                stream = self._streams[key] = _Stream(markdown=markdown)
            elif stream.ended and not stream.held:
                stream.ended = False  # the element streams again (a second text block)
            if not self._pending or self._pending[-1] != key:
                self._pending.append(key)
            stream.parts.append(text)
            self._pending_chars += len(text)
            self._throttle()

    def end_stream(self, kind: DeltaKind, ident: str) -> None:
        """The stream is complete: its held-back tail goes out with the next flush."""
        with self._lock:
            stream = self._streams.get((kind, ident))
            if stream is None:
                return
            stream.ended = True
            unrendered = stream.markdown is not None and stream.markdown.open_text
            if (stream.held or unrendered) and (kind, ident) not in self._pending:
                self._pending.append((kind, ident))

    def discard(self, kind: DeltaKind, ident: str) -> None:
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
        """Flush now if due, else make sure one timer fires when it is due."""
        full = self._pending_chars >= self.min_chars
        due = self._last_text + (self.interval if full else self.max_delay)
        now = self.clock()
        if due - now <= _EARLY:
            self._flush(timed=True)
        elif due < self._timer_due:  # no timer yet, or one set before the text grew
            if self._cancel_timer is not None:
                self._cancel_timer()
            self._cancel_timer = self.schedule(due - now, self._timer)
            self._timer_due = due if self._cancel_timer is not None else float("inf")

    def _timer(self) -> None:
        with self._lock:
            self._cancel_timer = None
            self._timer_due = float("inf")
            self._flush(timed=True)

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
            text = REDACT(self._take(stream)) if stream is not None else ""
            if text:
                batch.append(text if item == self._target else [item[0], item[1], text])
                self._target = item
                texts += 1
            if stream is not None and stream.markdown is not None:
                rendered = _blocks(item[1], stream, text)
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


def _blocks(ident: str, stream: _Stream, text: str) -> list[BlocksOp]:
    """The blocks that ``text`` (just sent) completed, and the open block's when the stream
    has ended and nothing of it is held back."""
    assert stream.markdown is not None
    done = [stream.markdown.feed(text) if text else None]
    if stream.ended and not stream.held:
        done.append(stream.markdown.finish())
    return [
        BlocksOp(op="blocks", id=ident, chars=chars, blocks=program)
        for chars, program in filter(None, done)
    ]


def _after_last_space(text: str) -> int:
    """Index just after the last whitespace character of ``text`` (0 if none)."""
    match = _SPACE.search(text[::-1])
    return 0 if match is None else len(text) - match.start()
