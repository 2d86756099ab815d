"""The SSE decoder, fed the same bytes split at every offset and in every chunk size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibyan_jupyter.providers.base import SseEvent
from mibyan_jupyter.providers.sse import SseDecoder


def decode(chunks: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def splits(body: bytes) -> list[list[bytes]]:
    """The body in two pieces at every offset, and in fixed sizes 1..7."""
    ways = [[body[:i], body[i:]] for i in range(len(body) + 1)]
    ways += [[body[i : i + n] for i in range(0, len(body), n)] for n in range(1, 8)]
    return ways


BODY = (
    "\ufeff: a comment, then an event with a name and two data lines\r\n"
    "event: delta\r\n"
    'data: {"text": "h\u00e9llo \u20ac \U0001f600"}\r\n'
    "data:second line, no space\r\n"
    "\r\n"
    "id: 42\n"
    "retry: 1500\n"
    "data: lf only\n"
    "\n"
    "data: bare CR line\r"
    "event: ignored because no dispatch yet\r"
    "data: more\r"
    "\r"
    "event: empty-data-not-dispatched\n"
    "\n"
    "data\n"
    "\n"
    "data: [DONE]\n"
    "\n"
).encode()

EXPECTED = [
    SseEvent("delta", '{"text": "h\u00e9llo \u20ac \U0001f600"}\nsecond line, no space'),
    SseEvent("message", "lf only", id="42", retry=1500),
    SseEvent("ignored because no dispatch yet", "bare CR line\nmore", id="42", retry=1500),
    SseEvent("message", "", id="42", retry=1500),
    SseEvent("message", "[DONE]", id="42", retry=1500),
]


def test_reference_decoding() -> None:
    assert decode([BODY]) == EXPECTED


@pytest.mark.parametrize("chunks", splits(BODY), ids=lambda c: f"{len(c)}x")
def test_every_split_gives_the_same_events(chunks: list[bytes]) -> None:
    assert decode(chunks) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_random_splits(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [BODY[a:b] for a, b in zip([0, *points], [*points, len(BODY)], strict=True)]
    assert decode(pieces) == EXPECTED


def test_unterminated_event_at_end_of_stream_is_dropped() -> None:
    assert decode([b"data: complete\n\n", b"data: cut off in the mid"]) == [
        SseEvent("message", "complete")
    ]
    assert decode([b"data: complete\n\ndata: no blank line\n"]) == [SseEvent("message", "complete")]


def test_trailing_cr_is_a_line_end() -> None:
    assert decode([b"data: x\r\r"]) == [SseEvent("message", "x")]
    assert decode([b"data: x\r", b"\n", b"\r\n"]) == [SseEvent("message", "x")]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert decode([b"data: \xff ok\n\n"]) == [SseEvent("message", "\ufffd ok")]


def test_id_with_nul_is_ignored_and_retry_must_be_digits() -> None:
    assert decode([b"id: a\x00b\nretry: soon\ndata: x\n\n"]) == [SseEvent("message", "x")]
