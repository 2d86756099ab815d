"""A reference reader of the blocks program (export/markdown_blocks.py) for tests: what
static/markdown.js's ``runProgram`` builds, as an HTML string (text escaped), so a test can
say what a page would show without a browser (the browser test runs the real one)."""

from __future__ import annotations

import html
import re

from mibyan_jupyter.export.markdown_blocks import CODES

VOID = {"br", "hr"}
_ALIGNS = {"l": "left", "c": "center", "r": "right"}


def run_program(program: str, text: str) -> str:
    """The HTML that ``program`` builds over ``text`` (attributes: href, start, align,
    data-lang; code colours as ``<span class=...>``)."""
    out: list[str] = []
    stack: list[tuple[str, str]] = []
    cursor = i = 0
    while i < len(program):
        c = program[i]
        if c.isdigit():
            number = re.match(r"\d+", program[i:])
            assert number is not None
            n = int(number[0])
            i += len(number[0])
            out.append(html.escape(text[cursor : cursor + n]))
            cursor += n
        elif c == "~":
            number = re.match(r"\d+", program[i + 1 :])
            assert number is not None, program[i:]
            cursor += int(number[0])
            i += 1 + len(number[0])
        elif c == "'":
            end, value = _quoted(program, i)
            out.append(html.escape(value))
            i = end
        elif c == "<":
            tag = CODES[program[i + 1]]
            i += 2
            attr = ""
            if i < len(program) and program[i] == "(":
                close = (
                    _quoted(program, i + 1)[0] if program[i + 1] == "'" else program.index(")", i)
                )
                attr = program[i + 1 : close]
                i = close + 1
            out.append(f"<{tag}{_attribute(tag, attr, text)}>")
            if tag not in VOID:
                stack.append((tag, attr))
                out.append("\0")  # where the element's text starts (for code colours)
        elif c == ">":
            tag, attr = stack.pop()
            start = len(out) - 1 - out[::-1].index("\0")
            inner = "".join(out[start + 1 :])
            del out[start:]
            out.append(_colour(inner, attr) if tag == "pre" else inner)
            out.append(f"</{tag}>")
            i += 1
        else:
            i += 1
    assert not stack, f"unclosed {stack} in {program!r}"
    return "".join(out)


def shown_text(program: str, text: str) -> str:
    """What the page shows as text (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]*>", "", run_program(program, text)))


def _quoted(program: str, at: int) -> tuple[int, str]:
    """(index after the closing quote, the unescaped text) of the literal at ``at``."""
    out: list[str] = []
    i = at + 1
    while program[i] != "'":
        if program[i] == "\\":
            i += 1
        out.append(program[i])
        i += 1
    return i + 1, "".join(out)


def _attribute(tag: str, attr: str, text: str) -> str:
    if not attr:
        return ""
    if tag == "a":
        place = re.fullmatch(r"(\d+),(\d+)", attr)
        if place:
            url = text[int(place[1]) : int(place[1]) + int(place[2])]
        elif attr.startswith("'"):
            url = _quoted(attr, 0)[1]
        else:
            url = attr
        return f' href="{html.escape(url)}"'
    if tag == "ol":
        return f' start="{int(attr)}"'
    if tag in ("th", "td"):
        return f' align="{_ALIGNS[attr]}"'
    if tag == "pre":
        return f' data-lang="{html.escape(attr.split("|")[0])}"'
    raise AssertionError(f"{tag} has no attribute, got {attr!r}")


def _colour(inner: str, attr: str) -> str:
    code = html.unescape(inner)
    runs = attr.split("|", 1)[1] if "|" in attr else ""
    out: list[str] = []
    at = 0
    for run in filter(None, runs.split(" ")):
        match = re.fullmatch(r"(\d+)([a-z]*)", run)
        assert match is not None, run
        piece = code[at : at + int(match[1])]
        at += len(piece)
        out.append(
            f'<span class="{match[2]}">{html.escape(piece)}</span>'
            if match[2]
            else html.escape(piece)
        )
    out.append(html.escape(code[at:]))
    return "".join(out)
