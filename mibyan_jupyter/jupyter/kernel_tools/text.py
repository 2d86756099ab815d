"""Text as the model reads it: no colour codes, no progress-bar redraws, a bounded length,
and no known secret.

Why head and tail: the start of an output says what ran and the end says how it finished
(a traceback's last line, a command's summary), so a long output keeps both and says how
much was left out, which tells the model to ask for less rather than to guess.
Why redact here: tool results go to the model provider and to the view before the store
ever scrubs them, and a shell command or a print can echo an API key from the environment.
"""

from __future__ import annotations

from mibyan_jupyter.export.outputs import strip_ansi
from mibyan_jupyter.secrets import REDACT

MODEL_LIMIT = 8_000
"""Characters of tool output the model gets per call (about 2,000 tokens)."""


def clip(text: str, limit: int = MODEL_LIMIT) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail and saying how
    much of the middle was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n… [{omitted:,} characters omitted] …\n{text[-tail:]}"


def for_model(text: str, limit: int = MODEL_LIMIT) -> str:
    """Output text cleaned for the model: colours removed, carriage-return redraws
    (progress bars) reduced to their last state, secrets redacted, clipped."""
    lines = strip_ansi(text).replace("\r\n", "\n").split("\n")
    cleaned = "\n".join(line.rsplit("\r", 1)[-1] for line in lines)
    return clip(REDACT(cleaned), limit)


def human_size(size: int) -> str:
    """``1536`` -> ``1.5 KB``: sizes the model reads at a glance."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``; ``many`` for irregular plurals (``entries``)."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {many or noun + 's'}"
