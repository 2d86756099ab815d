"""Text is made safe once, where it enters: everything downstream may assume valid Unicode.

Why: a Python ``str`` may hold lone surrogates (U+D800..U+DFFF) that no UTF-8 encoder
accepts. They arrive in ordinary ways — a file name that is not valid UTF-8 (``os.listdir``
decodes it with ``surrogateescape``), a JSON ``"\\ud83d"`` escape, an emoji whose surrogate
pair a provider splits across two stream deltas — and one of them in a transcript made every
later request, store write or export of the session fail. So tool results, streamed deltas,
prompts and file names pass through this module before they become messages
(docs/architecture.md, "Decisions").

Pure functions and one small state machine; no I/O.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
"""What a lone surrogate becomes (U+FFFD, the Unicode replacement character)."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR_OR_LONE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def _join_or_replace(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 2:  # a high + low surrogate pair: the character it encodes
        return chr(0x10000 + ((ord(text[0]) - 0xD800) << 10) + (ord(text[1]) - 0xDC00))
    return REPLACEMENT


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined into their characters and lone surrogates
    replaced by U+FFFD; returned as is (the same object) when it holds none (the common
    case costs one regex scan)."""
    if _SURROGATE.search(text) is None:
        return text
    return _PAIR_OR_LONE.sub(_join_or_replace, text)


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (holds no surrogate code point)."""
    return _SURROGATE.search(text) is None


class SurrogateJoiner:
    """Cleans a stream of text deltas where a surrogate pair may be split across two of
    them: a delta ending in a high surrogate keeps it back until the next delta shows
    whether its low half follows. :meth:`flush` at the end of the stream releases
    (replaces) what is held. The concatenation of what it returns equals
    ``clean_text`` of the concatenated input."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        """The clean text that can be shown now ("" while only a high surrogate waits)."""
        text = self._held + delta if self._held else delta
        self._held = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        return clean_text(text)

    def flush(self) -> str:
        """What is held back, cleaned (a high surrogate no low half ever followed)."""
        held, self._held = self._held, ""
        return clean_text(held)

    @property
    def holding(self) -> bool:
        return bool(self._held)
