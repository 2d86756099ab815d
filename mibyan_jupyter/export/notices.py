"""The notices of a run as the static transcript shows them: compaction receipts and notes.

Why here and not only in the live view: when a run ends the live view is replaced by the
static transcript (:mod:`.transcript`), and what the saved notebook keeps is that transcript.
A compaction's receipt (what was summarised and kept, tokens before and after, the summary)
and the notes sent with a request (budget warnings, context pressure) must survive it, at
their place in the conversation (docs/architecture.md, "Context compression"). The receipt's
wording is the live view's, made here once (the view layer may import it, never the reverse).

Untrusted text: the summary is model output, so in HTML it goes through
:func:`.html.markdown_html` (the shared sanitizer, mistune, then nh3) like every reply; the
notes are our text about the user's variables (names may be anything) and are escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.core.notices import CompactionNotice, NoteNotice
from mibyan_jupyter.export.fences import close_open_fence, fence
from mibyan_jupyter.export.html import markdown_html
from mibyan_jupyter.secrets import REDACT

Shown: TypeAlias = CompactionNotice | NoteNotice

COMPACTION_REASONS = {
    "preflight": "the conversation neared the context window",
    "aggressive": "the conversation was close to the context window",
    "overflow": "the model said the conversation no longer fits",
    "manual": "%agent compact",
}
_STYLE = "font-size:0.9em;color:var(--jp-ui-font-color2,#616161);margin:6px 0"


@dataclass(frozen=True, slots=True)
class Placed:
    """A notice and where it goes: before ``messages[at]`` (``at == len(messages)``: after
    the last message)."""

    at: int
    notice: Shown


@dataclass(slots=True)
class Seen:
    """A notice as a live view saw it: the message that ended last before it and the
    first that ended after it (``None``: none yet). Two references, not the run's whole
    transcript: a long run must not keep every message alive (the summarised ones)."""

    notice: Shown
    after: Message | None = None
    before: Message | None = None


def place_notices(messages: Sequence[Message], seen: Sequence[Seen]) -> list[Placed]:
    """Each notice placed after the message it followed, else before the one that came
    next, else at the start. Found by identity, not counted: a compaction rewrites the
    transcript in place, so a count would drift, while what it kept are the same objects
    (docs/architecture.md, "Context compression")."""
    index = {id(m): i for i, m in enumerate(messages)}
    placed: list[Placed] = []
    for item in seen:
        after = None if item.after is None else index.get(id(item.after))
        before = None if item.before is None else index.get(id(item.before))
        at = after + 1 if after is not None else before if before is not None else 0
        placed.append(Placed(at, item.notice))
    return placed


def compaction_text(notice: CompactionNotice) -> str:
    """The receipt in one line: why, how many messages were summarised, messages and
    tokens before and after, what was kept."""
    tokens = ""
    if notice.tokens_before is not None and notice.tokens_after is not None:
        tokens = f", {notice.tokens_before:,} → {notice.tokens_after:,} tokens"
    summarised = notice.summarised or max(0, notice.messages_before - notice.messages_after)
    kept = []
    if notice.kept_head:
        kept.append(f"the first {plural(notice.kept_head, 'message')}")
    if notice.kept_tail:
        kept.append(f"the last {plural(notice.kept_tail, 'message')}")
    return (
        f"Compacted the conversation ({COMPACTION_REASONS.get(notice.reason, notice.reason)}):"
        f" {plural(summarised, 'message')} summarised, {notice.messages_before} → "
        f"{notice.messages_after} messages{tokens}"
        + (f"; kept {' and '.join(kept)}" if kept else "")
    )


def notes_text(notice: NoteNotice) -> tuple[str, str] | None:
    """The notes as one line (the first line of each) and in full; ``None``: none sent."""
    notes = [n.strip() for n in notice.notes if n.strip()]
    if not notes:
        return None
    heads = "; ".join(n.splitlines()[0] for n in notes)
    return f"Sent with the request: {heads}", "\n\n".join(notes)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _parts(notice: Shown) -> tuple[str, str, str] | None:
    """``(kind, line, detail)`` with secrets redacted; ``None``: nothing to show."""
    if isinstance(notice, CompactionNotice):
        return "compaction", REDACT(compaction_text(notice)), REDACT(notice.summary.strip())
    notes = notes_text(notice)
    if notes is None:
        return None
    return "notes", REDACT(notes[0]), REDACT(notes[1])


def notice_html(notice: Shown) -> str:
    """A notice line; a compaction's summary (Markdown, sanitized) and the full notes
    (escaped text) in a collapsed ``<details>``."""
    parts = _parts(notice)
    if parts is None:
        return ""
    kind, line, detail = parts
    inner = f'<div class="mibyan-notice-text">{html.escape(line)}</div>'
    if detail and kind == "compaction":
        inner += (
            '<details class="mibyan-summary"><summary>Summary</summary>'
            f"{markdown_html(detail)}</details>"
        )
    elif detail:
        inner += (
            '<details class="mibyan-notes"><summary>Notes</summary>'
            f"<pre>{html.escape(detail)}</pre></details>"
        )
    return f'<div class="mibyan-notice" data-kind="{kind}" style="{_STYLE}">{inner}</div>'


def notice_markdown(notice: Shown) -> str:
    """The line in italics; the summary (Markdown) or the notes (as text) collapsed under
    it. The caller sanitizes the whole document."""
    parts = _parts(notice)
    if parts is None:
        return ""
    kind, line, detail = parts
    text = f"*{_escaped(line)}*"
    if not detail:
        return text
    label, body = (
        ("Summary", close_open_fence(detail))
        if kind == "compaction"
        else ("Notes", fence(detail, "text"))
    )
    return f"{text}\n\n<details><summary>{label}</summary>\n\n{body}\n\n</details>"


def notice_text(notice: Shown) -> str:
    parts = _parts(notice)
    if parts is None:
        return ""
    kind, line, detail = parts
    if not detail:
        return f"Notice: {line}"
    label = "Summary" if kind == "compaction" else "Notes"
    return f"Notice: {line}\n{label}:\n{detail}"


def _escaped(text: str) -> str:
    """``text`` as Markdown that shows every character as written (``my_df``, ``*``)."""
    return "".join(f"\\{c}" if c in "\\`*_[]<>#|~" else c for c in text)
