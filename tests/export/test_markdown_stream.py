"""A reply's Markdown as it streams (export/markdown_stream.py): blocks are rendered when they
complete, each once, and the text in between stays the open block."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from markdown_support import run_program, shown_text

from mibyan_jupyter.export import markdown_stream
from mibyan_jupyter.export.markdown_blocks import markdown_program
from mibyan_jupyter.export.markdown_stream import MarkdownStream

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


def feed_all(text: str, pieces: list[str]) -> list[tuple[int, int, str]]:
    """(start, chars, program) of every op, finishing at the end."""
    stream = MarkdownStream()
    ops: list[tuple[int, int, str]] = []
    for piece in [*pieces, None]:
        start = stream.upto
        done = stream.feed(piece) if piece is not None else stream.finish()
        if done is not None:
            ops.append((start, *done))
    assert "".join(p for p in pieces) == text
    return ops


def split(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces, at = [], 0
    while at < len(text):
        n = rng.randint(1, 14)
        pieces.append(text[at : at + n])
        at += n
    return pieces


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_real_document_in_random_pieces_reads_as_the_whole(seed: int) -> None:
    ops = feed_all(README, split(README, seed))
    assert len(ops) > 20  # rendered block by block, not at the end
    assert sum(chars for _, chars, _ in ops) == len(README)
    at = 0
    shown = []
    for start, chars, program in ops:
        assert start == at
        shown.append(shown_text(program, README[start : start + chars]))
        at += chars
    assert words("".join(shown)) == words(shown_text(markdown_program(README), README))


def test_each_character_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[int] = []

    def counting(source: str) -> str:
        parsed.append(len(source))
        return markdown_program(source)

    monkeypatch.setattr(markdown_stream, "markdown_program", counting)
    pieces = split(README, 7)
    feed_all(README, pieces)
    assert sum(parsed) == len(README)  # never the whole reply again per delta
    assert max(parsed) < len(README) / 5


def test_a_block_renders_once_the_next_one_starts() -> None:
    stream = MarkdownStream()
    assert stream.feed("First paragraph.\n\n") is None  # may still be continued (a list...)
    done = stream.feed("S")
    assert done is not None
    assert done[0] == len("First paragraph.\n\n")
    assert run_program(done[1], "First paragraph.\n\n") == "<p>First paragraph.</p>"
    assert stream.open_text == "S"


def test_a_fence_holds_its_blank_lines_and_renders_when_it_closes() -> None:
    stream = MarkdownStream()
    assert stream.feed("```python\na = 1\n\n") is None
    assert stream.feed("b = 2\n") is None
    done = stream.feed("```\n")
    assert done is not None
    code = "```python\na = 1\n\nb = 2\n```\n"
    assert shown_text(done[1], code) == "a = 1\n\nb = 2\n"
    assert run_program(done[1], code).startswith('<pre data-lang="python">')


def test_a_loose_list_and_an_indented_continuation_stay_one_block() -> None:
    text = "- a\n\n- b\n\n  more of b\n\nAfter"
    ops = feed_all(text, list(text))
    _start, chars, program = ops[0]
    html = run_program(program, text[:chars])
    assert html.count("<ul>") == 1
    assert html.count("<li>") == 2
    assert "more of b" in html
    assert text[chars:] == "After"


def test_a_heading_renders_at_the_end_of_its_line() -> None:
    stream = MarkdownStream()
    done = stream.feed("## Title\nText goes")
    assert done is not None
    assert run_program(done[1], "## Title\n") == "<h2>Title</h2>"
    assert stream.open_text == "Text goes"


def test_what_may_be_a_list_item_waits_for_its_marker() -> None:
    stream = MarkdownStream()
    assert stream.feed("- a\n\n1") is None  # "1. b" would continue the list
    done = stream.feed("999 was a year")
    assert done is not None
    assert re.fullmatch(r"<ul><li>a</li></ul>", run_program(done[1], "- a\n\n"))


def test_the_end_renders_the_open_block_and_more_text_starts_a_new_one() -> None:
    stream = MarkdownStream()
    assert stream.feed("Unfinished **bold") is None
    done = stream.finish()
    assert done is not None
    assert shown_text(done[1], "Unfinished **bold") == "Unfinished **bold"
    assert stream.finish() is None
    again = stream.feed("Second.\n\nThird")
    assert again is not None
    assert stream.upto == len("Unfinished **boldSecond.\n\n")
