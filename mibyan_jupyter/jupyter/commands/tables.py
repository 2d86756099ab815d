"""Small tables for ``%agent`` output: HTML for JupyterLab (every cell escaped, since
titles are user prompts and snippets are model text) and aligned plain text for terminals
and saved notebooks opened elsewhere."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


def _plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


class Table:
    """A displayable table (``_repr_mimebundle_``), with an optional caption and note."""

    def __init__(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        caption: str = "",
        note: str = "",
        highlight: Sequence[str] = (),
    ) -> None:
        self.headers = list(headers)
        self.rows = [["" if c is None else str(c) for c in row] for row in rows]
        self.caption = caption
        self.note = note
        self.highlight = set(highlight)
        """Snippet columns whose ``[...]`` marks (FTS highlights) become <mark>."""

    def _cell(self, header: str, text: str) -> str:
        escaped = html.escape(text)
        if header in self.highlight:
            escaped = escaped.replace("[", "<mark>").replace("]", "</mark>")
        return f"<td>{escaped}</td>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join(
            "<tr>"
            + "".join(self._cell(h, c) for h, c in zip(self.headers, row, strict=True))
            + "</tr>"
            for row in self.rows
        )
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        note = f"<p>{html.escape(self.note)}</p>" if self.note else ""
        return (
            f'<div class="mibyan-table"><table>{caption}<thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>{note}</div>"
        )

    def __repr__(self) -> str:
        parts = [self.caption] if self.caption else []
        parts.append(_plain(self.headers, self.rows) if self.rows else "(none)")
        if self.note:
            parts.append(self.note)
        return "\n".join(parts)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}


class Message:
    """A one-paragraph result (``%agent stop``, ``delete``...), HTML-escaped."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {
            "text/html": f'<div class="mibyan-message">{html.escape(self.text)}</div>',
            "text/plain": self.text,
        }
