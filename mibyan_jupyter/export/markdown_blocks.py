"""Complete Markdown blocks as a short program that rebuilds them from their source text.

Why a program and not HTML: the live view renders a reply's blocks as they complete
(:mod:`.markdown_stream`), and its front end must never put model text into ``innerHTML``.
It builds elements from this program instead: only the tags of :data:`TAGS` exist, text
goes in as text nodes, only a link's ``href`` (safe schemes), a list's start, a cell's
alignment and a code block's language and colours are attributes, and raw HTML the model
wrote is shown as the text it is. Why one string that points into the source: the front
end already holds the streamed text, so a shown run of it costs its length in digits, and
a JSON tree (quotes, commas and spaces around every node) cost half the text again
(measured by bench/stream_wire.py, docs/architecture.md, "Streaming").

The program, read left to right with a cursor into the blocks' text (from 0):

* ``<`` and a tag code (:data:`CODES`), then an optional ``(attribute)``: open an element;
  ``>`` closes the open one (``br`` and ``hr`` are never opened);
* a number ``N``: the next ``N`` characters at the cursor, shown as text;
* ``~N``: skip ``N`` characters (Markdown syntax, not shown); a space ends a number where
  a run follows a skip (``~2 5``);
* ``'text'``: literal text where the rendered text is not in the source (entities,
  escapes), with ``\\`` escaping ``'`` and ``\\``.

Attributes: a link ``(start,length)`` (its URL's place in the text) or ``('url')`` or
``(#)``; an ordered list ``(start)``; a cell ``(l)``, ``(c)`` or ``(r)``; a code block
``(lang|runs)``, runs as :func:`.highlight.runs` makes them.

Secrets: the source is the redacted text the front end has; literal text (not a substring
of it) is redacted again here. Images are never loaded (a remote image leaks data without
a click, the rule of :mod:`.html`): ``![alt](url)`` becomes a link reading
``[image: alt]``.
"""

from __future__ import annotations

import functools
import html
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.export.highlight import language, runs
from mibyan_jupyter.export.sanitize import unsafe_url
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    import mistune

CODES = {
    "p": "p", "P": "pre", "1": "h1", "2": "h2", "3": "h3", "4": "h4", "5": "h5", "6": "h6",
    "u": "ul", "o": "ol", "l": "li", "q": "blockquote", "c": "code", "e": "em",
    "s": "strong", "d": "del", "a": "a", "b": "br", "r": "hr", "t": "table", "h": "thead",
    "y": "tbody", "w": "tr", "H": "th", "D": "td",
}  # fmt: skip
"""Tag code -> tag: every element a program can make."""
TAGS = frozenset(CODES.values())
_CODE_OF = {tag: code for code, tag in CODES.items()}
_ALIGNS = {"left": "l", "center": "c", "right": "r"}
_WINDOW = 64
"""A short leaf is looked for this far ahead only (a far match would skip past others)."""


@functools.cache
def _parser() -> mistune.Markdown:
    import mistune

    return mistune.create_markdown(renderer=None, plugins=["strikethrough", "table", "url"])


def markdown_program(source: str) -> str:
    """The blocks of ``source`` (untrusted Markdown) as a program over ``source``."""
    tokens = _parser()(source)
    assert isinstance(tokens, list)  # renderer=None gives the token list
    builder = _Builder(source)
    builder.blocks(tokens)
    return "".join(
        item if isinstance(item, str) else (f"~{item[0]} " if item[0] else "") + str(item[1])
        for item in builder.out
    )


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Builder:
    """Walks mistune's tokens in source order; ``cursor`` is where the next leaf's text is
    looked for, so each leaf maps to the first match after the one before it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.cursor = 0
        self.out: list[str | tuple[int, int]] = []
        """Program pieces; a (skip, length) pair is a run of the source."""

    def open(self, tag: str, attr: str = "") -> None:
        self.out.append(f"<{_CODE_OF[tag]}{f'({attr})' if attr else ''}")

    def close(self) -> None:
        self.out.append(">")

    def element(self, tag: str, children: list[dict[str, Any]], *, inline: bool) -> None:
        self.open(tag)
        (self.inline if inline else self.blocks)(children)
        self.close()

    def blocks(self, tokens: list[dict[str, Any]]) -> None:
        for token in tokens:
            self.block(token)

    def block(self, token: dict[str, Any]) -> None:
        kind = token["type"]
        children = token.get("children") or []
        attrs = token.get("attrs") or {}
        if kind in ("paragraph", "block_text"):
            self.element("p", children, inline=True)
        elif kind == "heading":
            level = min(max(int(attrs.get("level", 1)), 1), 6)
            self.element(f"h{level}", children, inline=True)
        elif kind == "block_quote":
            self.element("blockquote", children, inline=False)
        elif kind == "list":
            start = attrs.get("start")
            ordered = bool(attrs.get("ordered"))
            numbered = ordered and isinstance(start, int) and start != 1
            self.open("ol" if ordered else "ul", str(start) if numbered else "")
            self.blocks(children)
            self.close()
        elif kind == "list_item":  # a tight item's text sits in the item, as HTML has it
            self.open("li")
            for child in children:
                if child["type"] == "block_text":
                    self.inline(child.get("children") or [])
                else:
                    self.block(child)
            self.close()
        elif kind == "block_code":
            self.code(token["raw"], attrs.get("info"))
        elif kind == "thematic_break":
            self.open("hr")
        elif kind == "block_html":
            self.open("p")
            self.leaf(token["raw"].rstrip("\n"))
            self.close()
        elif kind == "table":
            self.table(children)

    def code(self, raw: str, info: str | None) -> None:
        lang = "".join(c for c in language(info) if c.isalnum() or c in "+-_.#")[:40]
        self.open("pre", f"{lang}|{runs(raw, lang)}" if lang else "")
        self.leaf(raw)
        self.close()

    def table(self, parts: list[dict[str, Any]]) -> None:
        self.open("table")
        for part in parts:
            head = part["type"] == "table_head"
            self.open("thead" if head else "tbody")
            for row in [part] if head else part.get("children") or []:
                self.open("tr")
                for cell in row.get("children") or []:
                    attrs = cell.get("attrs") or {}
                    align = _ALIGNS.get(str(attrs.get("align")), "")
                    self.open("th" if attrs.get("head") else "td", align)
                    self.inline(cell.get("children") or [])
                    self.close()
                self.close()
            self.close()
        self.close()

    def inline(self, tokens: list[dict[str, Any]]) -> None:
        for token in tokens:
            self.span(token)

    def span(self, token: dict[str, Any]) -> None:
        kind = token["type"]
        children = token.get("children") or []
        wrap = {"emphasis": "em", "strong": "strong", "strikethrough": "del", "codespan": "code"}
        if kind == "text":
            self.leaf(html.unescape(token["raw"]))
        elif kind == "codespan":
            self.open("code")
            self.leaf(html.unescape(token["raw"]))
            self.close()
        elif kind in wrap:
            self.element(wrap[kind], children, inline=True)
        elif kind == "softbreak":
            self.leaf("\n")
        elif kind == "linebreak":
            self.open("br")
        elif kind in ("link", "image"):
            self.link(token, children, image=kind == "image")
        elif token.get("raw"):  # inline_html and anything unknown: its text
            self.leaf(str(token["raw"]))

    def link(self, token: dict[str, Any], children: list[dict[str, Any]], *, image: bool) -> None:
        url = str((token.get("attrs") or {}).get("url", ""))[:2000]
        at = len(self.out)
        self.open("a")
        if image:
            self.out.append(literal("[image: "))
            self.inline(children) if children else self.out.append(literal(url))
            self.out.append(literal("]"))
        else:
            self.inline(children)
        self.close()
        # The destination follows the text in the source (an autolink's text is its URL).
        self.out[at] = f"<a({'#' if unsafe_url(url) else self.place(url)})"

    def place(self, url: str) -> str:
        found = self.source.find(url, self.cursor)
        found = self.source.find(url) if found < 0 else found
        if found < 0 or not url:
            return literal(url if url in self.source else REDACT(url))
        return f"{found},{len(url)}"

    def leaf(self, text: str) -> None:
        """``text`` shown: from the source at (or just after) the cursor when it is there,
        else as a literal, whichever is shorter."""
        if not text:
            return
        limit = None if len(text) > 8 else self.cursor + _WINDOW + len(text)
        found = self.source.find(text, self.cursor, limit)
        if found < 0:
            self.out.append(literal(text if text in self.source else REDACT(text)))
            return
        skip = found - self.cursor
        if not skip and self.out and isinstance(self.out[-1], tuple):
            before = self.out[-1]  # contiguous with the run before: one run
            self.out[-1] = (before[0], before[1] + len(text))
        else:
            self.out.append((skip, len(text)))
        self.cursor = found + len(text)
