"""Code coloured by Pygments, the one highlighter of the live view and of the saved render.

Why Pygments and a small class set: Pygments comes with IPython (no new dependency) and runs
in the kernel, so the live view (which receives token classes, see
:mod:`.markdown_blocks`) and the static transcript a saved notebook keeps (HTML written
here) colour code the same way, with no JavaScript highlighter and no network. Pygments'
token tree is folded into ten classes named as Pygments names them (``k``, ``s``, ``c``...,
so nbconvert's ``.highlight`` CSS styles them too), each matched to a JupyterLab editor
colour: few classes means few runs, which is what the wire pays for; names, punctuation and
whitespace stay plain text.

JupyterLab's theme has no rules for Pygments classes (its editor colours are CodeMirror's
generated classes), so the saved HTML also carries each colour inline, as a hex value:
JupyterLab's sanitizer keeps ``color`` styles with hex values in an untrusted notebook and
drops ``var(...)``. The live view's style sheet maps the same classes to the theme's
``--jp-mirror-editor-*`` variables instead (docs/architecture.md, "Streaming").
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterator
from typing import Any, TypeAlias

Lexer: TypeAlias = Any
"""A Pygments lexer (Pygments ships no type hints; only ``get_tokens`` is called)."""

MAX_CODE = 100_000
"""Longer code is not highlighted (shown plain): a lexer is linear, but not free."""

STYLES: dict[str, str] = {
    "k": "color:#008000;font-weight:bold",
    "o": "color:#7800c2",
    "m": "color:#008800",
    "s": "color:#ba2121",
    "c": "color:#408080;font-style:italic",
    "nb": "color:#008000",
    "nf": "color:#0000ff",
    "nd": "color:#aa22ff",
    "nv": "color:#00366d",
    "nt": "color:#117700",
}
"""Our classes and the inline style of each in the saved HTML (JupyterLab's light colours)."""

# Pygments token type (as a dotted name) -> our class; a type not listed takes its parent's.
_PRE_STYLE = (
    "background:var(--jp-cell-editor-background,#f7f7f7);padding:6px 8px;"
    "border-radius:3px;overflow-x:auto"
)
_CLASSES: dict[str, str] = {
    "Keyword": "k",
    "Operator": "o",
    "Operator.Word": "k",
    "Literal.Number": "m",
    "Literal.String": "s",
    "Literal.String.Interpol": "",
    "Comment": "c",
    "Name.Builtin": "nb",
    "Name.Exception": "nb",
    "Name.Function": "nf",
    "Name.Class": "nf",
    "Name.Decorator": "nd",
    "Name.Variable": "nv",
    "Name.Tag": "nt",
    "Name.Attribute": "nv",
}
_ALIASES = {
    "py": "python",
    "python3": "python",
    "ipython": "ipython3",
    "sh": "bash",
    "shell": "bash",
}


def language(info: str | None) -> str:
    """The language a fence's info string names (its first word, lower case), or ""."""
    words = (info or "").split()
    return words[0].lower() if words else ""


def spans(code: str, lang: str) -> list[tuple[str, str]]:
    """``code`` as (class, text) runs in order, adjacent runs of one class joined; one
    plain run when the language is unknown, empty or the code too long. The texts join
    to ``code`` exactly."""
    lexer = _lexer(lang) if code and len(code) <= MAX_CODE else None
    if lexer is None:
        return [("", code)] if code else []
    out: list[tuple[str, str]] = []
    for cls, text in _tokens(lexer, code):
        if out and out[-1][0] == cls:
            out[-1] = (cls, out[-1][1] + text)
        elif text:
            out.append((cls, text))
    return out


def runs(code: str, lang: str) -> str:
    """The classes of ``code`` as a run-length string for the wire: runs separated by a
    space, each its length followed by its class (none for plain text), e.g. ``"3k 1 4nf"``.
    "" when nothing is coloured (unknown language)."""
    parts = spans(code, lang)
    if not any(cls for cls, _ in parts):
        return ""
    return " ".join(f"{len(text)}{cls}" for cls, text in parts)


def highlight_html(code: str, lang: str) -> str:
    """``code`` as a ``<pre>`` block of escaped text in coloured spans (class and inline
    style): safe by construction, every character of ``code`` is escaped."""
    inner = "".join(
        f'<span class="{cls}" style="{STYLES[cls]}">{html.escape(text)}</span>'
        if cls
        else html.escape(text)
        for cls, text in spans(code, lang)
    )
    data = f' data-lang="{html.escape(lang)}"' if lang else ""
    return f'<pre class="mibyan-code"{data} style="{_PRE_STYLE}"><code>{inner}</code></pre>'


def _tokens(lexer: Lexer, code: str) -> Iterator[tuple[str, str]]:
    # Pygments adds a newline at the end unless told not to: stripnl/ensurenl are off.
    for kind, text in lexer.get_tokens(code):
        yield _class_of(str(kind)[len("Token.") :]), text


@functools.cache
def _class_of(dotted: str) -> str:
    name = dotted
    while name:
        if name in _CLASSES:
            return _CLASSES[name]
        name = name.rpartition(".")[0]
    return ""


@functools.cache
def _lexer(lang: str) -> Lexer | None:
    if not lang:
        return None
    from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]

    try:
        return get_lexer_by_name(_ALIASES.get(lang, lang), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
