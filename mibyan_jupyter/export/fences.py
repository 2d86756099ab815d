"""Text put in Markdown as code: fences and code spans that their content cannot close.

Why a module of its own: every layout of a transcript (the notebook, the Markdown export,
the static transcript) quotes model and tool text as code, and a fence the text could close
would turn the rest of it into live Markdown (and, through raw HTML, into live HTML).
"""

from __future__ import annotations

import re


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block that nothing inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    newline = "" if text.endswith("\n") else "\n"
    return f"{marks}{info}\n{text}{newline}{marks}"


def code_span(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def clipped(text: str, info: str, limit: int) -> str:
    """A fenced block of at most ``limit`` characters of ``text``, with a note saying how
    much was left out."""
    if len(text) <= limit:
        return fence(text, info)
    return f"{fence(text[:limit], info)}\n\n… (truncated, {len(text) - limit:,} more characters)"


def close_open_fence(text: str) -> str:
    """``text`` with a fence it leaves open closed (a reply stopped mid-code-block), so a
    note after it is not code and, in the Markdown export, the next section is not either."""
    opened: str | None = None
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 3:
            continue
        if opened is None:
            match = re.match(r"(`{3,}|~{3,})(.*)", stripped)
            if match and not (match[1][0] == "`" and "`" in match[2]):
                opened = match[1]
        elif re.fullmatch(rf"{re.escape(opened[0])}{{{len(opened)},}}[ \t]*", stripped):
            opened = None
    return text if opened is None else f"{text.rstrip()}\n{opened}"
