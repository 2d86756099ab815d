"""Text made safe where it enters: lone surrogates replaced, pairs joined, also across the
boundary of two stream deltas."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mibyan_jupyter.core.safe_text import REPLACEMENT, SurrogateJoiner, clean_text, is_clean

HIGH, LOW = "\ud83d", "\ude00"  # the two halves of U+1F600


def test_clean_text_keeps_ordinary_text_as_the_same_object() -> None:
    text = "plain text, accents é and emoji 😀"
    assert clean_text(text) is text


def test_lone_surrogates_are_replaced_and_pairs_joined() -> None:
    assert clean_text("a" + HIGH + "b") == "a" + REPLACEMENT + "b"
    assert clean_text(LOW + "x") == REPLACEMENT + "x"
    assert clean_text(HIGH + LOW) == "😀"
    assert clean_text(LOW + HIGH) == REPLACEMENT * 2  # the wrong order is no pair
    assert clean_text("report-\udcff.csv").encode() == "report-\ufffd.csv".encode()


def test_a_pair_split_across_two_deltas_becomes_one_character() -> None:
    joiner = SurrogateJoiner()
    shown = [joiner.feed("smile " + HIGH), joiner.feed(LOW + " done"), joiner.flush()]
    assert shown == ["smile ", "😀 done", ""]


def test_a_high_surrogate_at_the_end_of_the_stream_is_replaced() -> None:
    joiner = SurrogateJoiner()
    assert joiner.feed("end" + HIGH) == "end"
    assert joiner.holding
    assert joiner.flush() == REPLACEMENT
    assert not joiner.holding


surrogate_text = st.lists(
    st.sampled_from(["a", "é", "😀", HIGH, LOW, "\udcff", " "]), max_size=30
).map("".join)


@given(surrogate_text, st.lists(st.integers(min_value=0, max_value=30), max_size=6))
def test_streamed_cleaning_equals_cleaning_the_whole(text: str, cuts: list[int]) -> None:
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    joiner = SurrogateJoiner()
    streamed = "".join(joiner.feed(p) for p in pieces) + joiner.flush()
    assert streamed == clean_text(text)
    assert is_clean(streamed)
    streamed.encode("utf-8")  # never raises
