"""The delta streams of the live view's outbox (:mod:`.outbox`): one element's streamed
text, what of it is held back, what of it is rendered, and how long it has waited.

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

Waiting: the outbox's throttle flushes when the deltas the next flush would send whole
have waited its ``lag`` on average (docs/architecture.md, "Streaming"). A delta counts once
its last character is not in the held-back tail, that is once a whitespace character
follows it (or the stream ends); :class:`Waiting` keeps their number and the sum of their
arrival times, so the mean is O(1) and each delta is counted in and out once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mibyan_jupyter.export.markdown_stream import MarkdownStream
from mibyan_jupyter.jupyter.view.ops import BlocksOp

_SPACE = re.compile(r"\s")


@dataclass(slots=True)
class DeltaStream:
    """One element's streamed text (an assistant text, its thinking, a call's arguments)."""

    parts: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    """The held-back tail: text after the last space sent (a list, so a long run without
    spaces is not copied at every flush)."""
    ended: bool = False
    waiting: list[tuple[float, int]] = field(default_factory=list)
    """(arrival, characters) of the deltas not yet wholly sent, oldest first."""
    ready: int = 0
    """How many of them the next flush sends whole (the rest are the held-back tail)."""
    markdown: MarkdownStream | None = None
    """A reply's text only: its blocks, rendered as they complete."""

    def take(self) -> str:
        """The text to send now; keeps back what follows the last space until the stream
        ends."""
        new = "".join(self.parts)
        self.parts.clear()
        if self.ended:
            text = "".join(self.held) + new
            self.held.clear()
            return text
        cut = after_last_space(new)
        if cut == 0:
            self.held.append(new)
            return ""
        text = "".join(self.held) + new[:cut]
        self.held[:] = [new[cut:]] if cut < len(new) else []
        return text

    def blocks(self, ident: str, text: str) -> list[BlocksOp]:
        """The blocks that ``text`` (just sent) completed, and the open block's when the
        stream has ended and nothing of it is held back."""
        assert self.markdown is not None
        done = [self.markdown.feed(text) if text else None]
        if self.ended and not self.held:
            done.append(self.markdown.finish())
        return [
            BlocksOp(op="blocks", id=ident, chars=chars, blocks=program)
            for chars, program in filter(None, done)
        ]


class Waiting:
    """The deltas of every stream that the next flush sends whole, and when they came."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        """The sum of their arrival times."""

    def mean_arrival(self) -> float | None:
        return self.total / self.count if self.count else None

    def arrived(self, stream: DeltaStream, text: str, now: float) -> None:
        """``text`` was appended to ``stream`` at ``now``: what precedes its last space
        (the delta itself when the space ends it) goes whole with the next flush."""
        waiting = stream.waiting
        waiting.append((now, len(text)))
        if text[-1].isspace():
            self.make_ready(stream, len(waiting))
        elif _SPACE.search(text) is not None:  # its own last characters are held
            self.make_ready(stream, len(waiting) - 1)

    def make_ready(self, stream: DeltaStream, ready: int) -> None:
        """The first ``ready`` deltas of ``stream`` go whole with the next flush."""
        if ready <= stream.ready:
            return
        for arrival, _ in stream.waiting[stream.ready : ready]:
            self.count += 1
            self.total += arrival
        stream.ready = ready

    def sent_out(self, stream: DeltaStream) -> None:
        """Forget the deltas of ``stream`` whose text is now all sent: those still waiting
        are the ones its held-back tail is made of."""
        held = sum(map(len, stream.held))
        keep = len(stream.waiting)
        while keep and held > 0:
            keep -= 1
            held -= stream.waiting[keep][1]
        for arrival, _ in stream.waiting[: min(keep, stream.ready)]:
            self.count -= 1
            self.total -= arrival
        del stream.waiting[:keep]
        stream.ready = max(0, stream.ready - keep)
        if not self.count:
            self.total = 0.0  # no float residue


def after_last_space(text: str) -> int:
    """Index just after the last whitespace character of ``text`` (0 if none)."""
    match = _SPACE.search(text[::-1])
    return 0 if match is None else len(text) - match.start()
