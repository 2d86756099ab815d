"""Model-written Markdown made safe to render, with the Markdown itself kept.

Model output is untrusted (a prompt injection in a web page the agent read can make it write
``<img src=x onerror=...>``), and an exported notebook is rendered by many programs, some of
which do not sanitize (``nbconvert --to html`` puts Markdown cells' HTML in the page as is).

Why not run an HTML sanitizer over the whole text: Markdown is not HTML. nh3 escapes every
``<``, ``>`` and ``&`` it sees as text, which is harmless in prose (``&lt;`` renders as
``<``) but shows inside code (``a &lt; b``), turns ``> quote`` into ``&gt; quote``, and
knows nothing of Markdown links, so ``[x](javascript:...)`` would pass. So:

- fenced code blocks that every CommonMark renderer must read as code are kept byte for
  byte (see :func:`_chunks` for when a fence is trusted: getting this wrong one way is only
  cosmetic, the other way a hole, so in doubt a fence is treated as prose);
- in the prose, tags that ammonia's allow-list keeps (``<b>``, ``<img>``, ``<details>``...)
  go through nh3, which drops event handlers and ``javascript:`` URLs and closes what is
  left open; the text around them never does, so it is not entity-escaped. Every other
  tag (``<script>``, ``<iframe>``, ``<String>`` in ``List<String>``), comment or stray
  ``<`` is escaped, so the reader sees what the model wrote and nothing runs. The text is
  also inert as HTML, because inside an HTML block a renderer passes it through raw: no
  ``<`` that could open a tag is left in it (an autolink ``<https://...>`` loses its
  brackets);
- link destinations (inline, reference, LaTeX ``\\href``) with a scheme other than
  http(s)/mailto become ``#``; such an autolink is escaped.

The result is a fixed point: sanitizing it again changes nothing, which is checked (nh3 may
move text, e.g. out of a ``<table>``, so one pass is not always the last).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nh3

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})

_PLACEHOLDER_MARKS = str.maketrans({"\ue000": "\ufffd", "\ue001": "\ufffd"})
_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")
_TRIGGER = re.compile(r"<|\]\(|\]:|\\(?:href|url)")

_FENCE_OPEN = re.compile(r" ?(`{3,}|~{3,})(.*)")
# A line that may start an HTML block (after container markers, generously). A line with
# "]:" may start a link reference definition, whose title can run over the next lines.
_HTML_BLOCK_START = re.compile(r"[ \t>*+\-0-9.)]*<[A-Za-z/!?]")

_INLINE = re.compile(
    r"""
    (?P<autolink><[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*>)
  | (?P<email><[A-Za-z0-9.!\#$%&'*+/=?^_`{|}~\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?
              (?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*>)
  | (?P<html><!--.*?-->
           | <\?.*?\?>
           | <!\[CDATA\[.*?\]\]>
           | <![A-Za-z][^>]*>
           | </?[A-Za-z](?:"[^"]*"|'[^']*'|[^'">])*>)
    """,
    re.VERBOSE | re.DOTALL,
)
_STRAY_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
# A well-formed tag as CommonMark defines one; anything else the broad pattern above caught
# (``<b, List<String>``) is text to a renderer too, so it is escaped, not handed to nh3.
_WELL_FORMED_TAG = re.compile(
    r"""<(?P<name>[A-Za-z][A-Za-z0-9-]*)
         (?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?)*\s*/?>
      | </(?P<closing>[A-Za-z][A-Za-z0-9-]*)\s*>""",
    re.VERBOSE,
)

# Renderers differ in the whitespace they skip before a destination (marked: any \s), so
# all of it is skipped here; a longer destination than a renderer's is only safer.
_DEST_START = re.compile(r"\](?:\(|:)[\s\ufeff]*")
_MATH_LINK = re.compile(r"(\\(?:href|url)\s*\{)([^{}]*)(\})")
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")

_MAX_PASSES = 4


def sanitize_markdown(text: str) -> str:
    """``text`` (Markdown from a model or a user) with dangerous HTML and links removed.

    Sanitize a whole document at once (a notebook cell, a whole Markdown export): whether a
    fence is code depends on everything before it.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_PLACEHOLDER_MARKS)
    if not _TRIGGER.search(text):
        return text
    for _ in range(_MAX_PASSES):
        cleaned = _sanitize_once(text)
        if cleaned == text:
            return text
        text = cleaned
    # Not settled (never seen): no HTML at all is safe everywhere, if ugly inside code.
    return _fix_links(text.replace("<", "&lt;"))


def sanitize_html(text: str) -> str:
    """An HTML document or fragment (a ``text/html`` output) through nh3's allow-list."""
    return _cleaner().clean(text)


def sanitize_latex(text: str) -> str:
    """LaTeX (a ``text/latex`` output) with unsafe ``\\href``/``\\url`` targets made ``#``;
    MathJax renders those as links."""
    return _fix_math_links(text)


def unsafe_url(url: str) -> bool:
    """Whether a link destination has a scheme other than http(s)/mailto, read as a
    browser would after Markdown unescaping: backslash escapes and entities decoded,
    whitespace and control characters (which browsers drop) removed."""
    if url.startswith("<") and url.endswith(">"):
        url = url[1:-1]
    plain = _CONTROL.sub("", html.unescape(_BACKSLASH_ESCAPE.sub(r"\1", url)))
    match = _SCHEME.match(plain)
    return match is not None and match[1].lower() not in SAFE_SCHEMES


@functools.cache
def _cleaner() -> nh3.Cleaner:
    import nh3

    return nh3.Cleaner(url_schemes=set(SAFE_SCHEMES))


def _sanitize_once(text: str) -> str:
    out: list[str] = []
    for is_code, lines in _chunks(text.split("\n")):
        chunk = "\n".join(lines)
        out.append(chunk if is_code else _clean_prose(chunk))
    return "\n".join(out)


def _chunks(lines: list[str]) -> Iterator[tuple[bool, list[str]]]:
    """Split lines into prose and trusted fenced code, in order.

    A fence is trusted only if it opens at column 0 or 1 (no list item or block quote can
    hold it there, and a fence is never a lazy continuation), has its closing line (an
    unclosed fence runs to the end in CommonMark but not in every renderer), and no prose
    line before it could have opened an HTML block or a link reference definition, either
    of which can swallow the fence line and turn its "code" into live HTML. Once such a
    line is seen, every later fence is prose.
    """
    prose: list[str] = []
    trusted = True
    index = 0
    while index < len(lines):
        line = lines[index]
        opener = _FENCE_OPEN.fullmatch(line) if trusted else None
        if opener and not (opener[1][0] == "`" and "`" in opener[2]):
            close = _closing_line(lines, index + 1, opener[1])
            if close is not None:
                if prose:
                    yield False, prose
                    prose = []
                yield True, lines[index : close + 1]
                index = close + 1
                continue
        prose.append(line)
        if "]:" in line or _HTML_BLOCK_START.match(line):
            trusted = False
        index += 1
    if prose:
        yield False, prose


def _closing_line(lines: list[str], start: int, fence: str) -> int | None:
    closer = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
    for index in range(start, len(lines)):
        if closer.fullmatch(lines[index]):
            return index
    return None


def _clean_prose(text: str) -> str:
    core = text.rstrip()
    # Trailing blank lines stay outside nh3, which appends the closing tags it adds at the
    # end: after a newline they would start an HTML block in front of the next fence.
    return _clean_html(_fix_links(core)) + text[len(core) :]


def _clean_html(text: str) -> str:
    """Raw HTML in ``text`` through nh3 or escaped, the text around it untouched.

    The text between allowed tags is replaced by placeholders, so nh3 sees a document of
    tags and placeholders, decides what survives (including which text: a placeholder
    inside ``<script>`` disappears), and the placeholders are put back verbatim.
    """
    texts: list[str] = []
    skeleton: list[str] = []
    pending: list[str] = []
    position = 0

    def flush() -> None:
        if pending:
            skeleton.append(f"\ue000{len(texts)}\ue001")
            texts.append("".join(pending))
            pending.clear()

    for match in _INLINE.finditer(text):
        pending.append(_STRAY_TAG_START.sub("&lt;", text[position : match.start()]))
        position = match.end()
        piece = match[0]
        if match["html"] is not None:
            if _allowed_tag(piece):
                flush()
                skeleton.append(piece)
            else:
                pending.append(piece.replace("<", "&lt;"))
        elif match["autolink"] is not None and unsafe_url(piece[1:-1]):
            pending.append("&lt;" + piece[1:])
        else:
            # Kept without its brackets (GFM renderers still link a bare URL): inside an HTML
            # block, text is raw HTML, and <https:/onclick=...> would be an element.
            pending.append(piece[1:-1])
    pending.append(_STRAY_TAG_START.sub("&lt;", text[position:]))
    if len(skeleton) == 0:
        return "".join(pending)
    flush()
    cleaned = _cleaner().clean("".join(skeleton))
    return _PLACEHOLDER.sub(lambda m: texts[int(m[1])], cleaned)


def _allowed_tag(piece: str) -> bool:
    tag = _WELL_FORMED_TAG.fullmatch(piece)
    return tag is not None and (tag["name"] or tag["closing"]).lower() in _allowed_tags()


@functools.cache
def _allowed_tags() -> frozenset[str]:
    import nh3

    return frozenset(nh3.ALLOWED_TAGS)


def _fix_links(text: str) -> str:
    """Every Markdown link destination with an unsafe scheme replaced by ``#``."""
    out: list[str] = []
    position = 0
    search_from = 0
    while (match := _DEST_START.search(text, search_from)) is not None:
        start = match.end()
        end = _destination_end(text, start)
        # ``<...>`` encloses a destination; an unclosed ``<`` (the rest of the line is
        # the destination then) is judged without it too.
        destination = text[start:end].removeprefix("<").removesuffix(">")
        if unsafe_url(destination):
            out.append(text[position:start])
            out.append("#")
            position = search_from = end
        else:
            search_from = start
    out.append(text[position:])
    return _fix_math_links("".join(out))


def _fix_math_links(text: str) -> str:
    return _MATH_LINK.sub(lambda m: m[1] + "#" + m[3] if unsafe_url(m[2]) else m[0], text)


def _destination_end(text: str, start: int) -> int:
    """Where the link destination starting at ``start`` ends (generously: more is safer)."""
    if text.startswith("<", start):
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        close = text.find(">", start, line_end)
        return line_end if close < 0 else close + 1
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char.isspace():
            break
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                break
            depth -= 1
        index += 1
    return min(index, len(text))
