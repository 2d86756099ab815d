"""A reply's Markdown as it streams: where complete blocks end, each rendered once.

Why incremental: a 20,000-token reply arrives in thousands of deltas; parsing the whole
text at each one would make the kernel's cost grow with the square of the reply. Here each
fed piece is scanned once, line by line, for a block boundary; only the text between the
last boundary and the new one (the blocks just completed) is parsed, by
:func:`.markdown_blocks.markdown_program`. What follows the last boundary is the open block,
which the live view shows as plain text until it completes (docs/architecture.md,
"Streaming").

A boundary is the start of a line that can only begin a new block:

* after a blank line outside a fence, a line that is not indented (an indented one may
  continue a list item or be code) and, when the open block is a list, not a list item
  (so a loose list stays one list);
* right after a closing fence line, and right after an ATX heading that starts a block.

A line still streaming decides as soon as its first character does. Blocks cut this way
are parsed apart, which is what CommonMark does at these places, except for rare
constructs (a link reference defined in a later block); such a difference is cosmetic:
the elements come from a whitelist whatever the text is.
"""

from __future__ import annotations

import re

from mibyan_jupyter.export.markdown_blocks import markdown_program

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_LIST_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_MAYBE_ITEM = frozenset("-*+0123456789")


class MarkdownStream:
    """One element's streamed text (redacted, as the front end has it): :meth:`feed` each
    piece sent, :meth:`finish` at the stream's end. Both return ``(chars, program)`` for
    the blocks completed: the next ``chars`` characters after :attr:`upto` (before the
    call), which the program reads; ``None`` when no block completed."""

    def __init__(self) -> None:
        self.upto = 0
        """Characters of the text rendered as blocks so far."""
        self._tail = ""
        """The text after ``upto``: the open block (and lines not yet cut)."""
        self._scan = 0
        """Index in the tail of the first line not yet classified."""
        self._cut = 0
        """Index in the tail of the last boundary found."""
        self._fence: str | None = None
        self._blank = False
        self._list = False

    def feed(self, text: str) -> tuple[int, str] | None:
        self._tail += text
        self._classify()
        return self._render(self._cut)

    def finish(self) -> tuple[int, str] | None:
        """Render the open block too: the text is complete (more may still follow, as a
        new block)."""
        done = self._render(len(self._tail))
        self._fence = None
        self._blank = self._list = False
        return done

    @property
    def open_text(self) -> str:
        """The text not rendered yet."""
        return self._tail

    def _classify(self) -> None:
        tail = self._tail
        while (end := tail.find("\n", self._scan)) >= 0:
            self._line(tail[self._scan : end], self._scan, end + 1)
            self._scan = end + 1
        rest = tail[self._scan :]
        if rest and self._fence is None and self._blank and self._starts_block(rest, True):
            self._cut = self._scan

    def _line(self, line: str, start: int, end: int) -> None:
        if self._fence is not None:
            marker = self._fence
            if re.fullmatch(rf" {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*", line):
                self._fence = None
                self._cut = end
                self._blank = False
            return
        if not line.strip():
            self._blank = True
            return
        at_start = start == self._cut
        if self._blank and self._starts_block(line, False):
            self._cut = start
            at_start = True
        if at_start:
            self._list = _LIST_ITEM.match(line) is not None
        self._blank = False
        opener = _FENCE.fullmatch(line)
        if opener and not (opener[1][0] == "`" and "`" in opener[2]):
            self._fence = opener[1]
        elif at_start and _HEADING.match(line):
            self._cut = end

    def _starts_block(self, line: str, partial: bool) -> bool:
        """Whether ``line``, after a blank line, must start a new block (``partial``: the
        line is still streaming, so a possible list marker waits for more)."""
        if line[0] in " \t":
            return False
        if self._list:
            if partial and line[0] in _MAYBE_ITEM and len(line) < 12:
                return False
            return _LIST_ITEM.match(line) is None
        return True

    def _render(self, cut: int) -> tuple[int, str] | None:
        if cut <= 0:
            return None
        segment, self._tail = self._tail[:cut], self._tail[cut:]
        self._scan = max(self._scan - cut, 0)
        self._cut = 0
        self.upto += len(segment)
        return len(segment), markdown_program(segment)
