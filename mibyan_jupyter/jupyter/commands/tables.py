"""Small tables for ``%agent`` output: HTML for JupyterLab (every cell escaped, since
titles are user prompts and snippets are model text) and aligned plain text for terminals
and saved notebooks opened elsewhere.

Cells are shown verbatim: a search snippet is code as often as prose, so its line breaks
and spaces are kept (``white-space: pre-wrap`` in HTML; a cell of several lines spans
several lines of the plain table), and its matches are marked from offsets
(:class:`Highlighted`), never from characters in the text."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


class Highlighted:
    """A cell's text with matched spans (``(start, end)`` offsets) to mark in HTML."""

    def __init__(self, text: str, spans: Sequence[tuple[int, int]] = ()) -> None:
        self.text = text
        self.spans = tuple(spans)

    def __str__(self) -> str:
        return self.text

    def html(self) -> str:
        out: list[str] = []
        at = 0
        for start, end in self.spans:
            out.append(html.escape(self.text[at:start]))
            out.append(f"<mark>{html.escape(self.text[start:end])}</mark>")
            at = end
        out.append(html.escape(self.text[at:]))
        return "".join(out)


def _plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns; a cell with line breaks spans as many lines, the others padded."""
    split = [[cell.split("\n") for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in split:
        widths = [max(w, *(len(line) for line in c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in split:
        for n in range(max(len(c) for c in row)):
            parts = (c[n] if n < len(c) else "" for c in row)
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)


def _as_cell(value: Any) -> Highlighted:
    if isinstance(value, Highlighted):
        return value
    return Highlighted("" if value is None else str(value))


_PRE = ' style="white-space: pre-wrap; text-align: left"'
"""Line breaks and indentation shown as they are (a snippet of code stays code)."""


class Table:
    """A displayable table (``_repr_mimebundle_``), with an optional caption and note."""

    def __init__(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        caption: str = "",
        note: str = "",
    ) -> None:
        self.headers = list(headers)
        self.cells = [[_as_cell(c) for c in row] for row in rows]
        self.rows = [[c.text for c in row] for row in self.cells]
        self.caption = caption
        self.note = note

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join(
            "<tr>" + "".join(f"<td{_PRE}>{c.html()}</td>" for c in row) + "</tr>"
            for row in self.cells
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
