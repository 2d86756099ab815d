"""Real Markdown for the stream benchmarks: the READMEs the installed packages ship.

Why these: a model's answer is prose with headings, lists, tables, code blocks, inline
code, emphasis and links, and the packages of this project's environment carry thousands
of lines of exactly that, written by people (their ``METADATA`` long descriptions, declared
``text/markdown``). No network, no file of ours to keep in step. The corpus is the
descriptions of every installed distribution in name order, joined by blank lines and
repeated when short, cut into tokens of at most five visible characters with their leading
whitespace (about 4.5 characters each, as a model's tokens are), so ``tokens(n)`` is the
same list on the same environment.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

_TOKEN = re.compile(r"\s*\S{1,5}|\s+")


@functools.cache
def corpus() -> str:
    """Every installed Markdown long description, in distribution-name order."""
    bodies: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        meta = dist.metadata
        if "markdown" not in (meta.get("Description-Content-Type") or ""):
            continue
        body = meta.get_payload() or meta.get("Description") or ""
        if isinstance(body, str) and body.strip():
            bodies.setdefault(str(meta["Name"]).lower(), body.replace("\r\n", "\n").strip())
    if not bodies:
        raise RuntimeError("no installed distribution ships a Markdown description")
    return "\n\n".join(bodies[name] for name in sorted(bodies)) + "\n"


def tokens(n: int) -> list[str]:
    """The first ``n`` tokens of the corpus (repeated as needed)."""
    text = corpus()
    out: list[str] = []
    while len(out) < n:
        out.extend(_TOKEN.findall(text)[: n - len(out)])
    return out


def features(text: str) -> dict[str, int]:
    """How much of each Markdown construct ``text`` holds (for the benchmark's report)."""
    lines = text.split("\n")
    return {
        "headings": sum(bool(re.match(r"#{1,6} ", line)) for line in lines),
        "list_items": sum(bool(re.match(r"\s*(?:[-*+]|\d+[.)]) ", line)) for line in lines),
        "table_rows": sum(line.lstrip().startswith("|") for line in lines),
        "code_fences": sum(bool(re.match(r"\s*(?:```|~~~)", line)) for line in lines) // 2,
        "inline_code": text.count("`") // 2,
        "links": len(re.findall(r"\]\(", text)),
        "emphasis": len(re.findall(r"\*\*\S|(?<![*\w])\*\S|(?<!\w)_\S", text)),
    }
