"""Streaming cost of the live view: bytes linear in the reply, at most ~20 flushes a second,
no secret cut in half by a flush. Time is a fake clock with a fake timer, except in the one
test that checks the real asyncio timer."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import pytest
from view_support import (
    HEADER,
    FakeTime,
    Recorder,
    Sent,
    max_per_window,
    record_comms,
    reply_events,
    timed_view,
    update,
)

from mibyan_jupyter.core.events import (
    ApprovalRequested,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.stream import TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.jupyter.view.outbox import MAX_DELAY, MIN_CHARS

WORDS = ("the", "data", "frame", "has", "rows", "and", "each", "value", "is", "a", "mean")
KEY = "sk-test-" + "Q7x" * 10


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def tokens(n: int) -> list[str]:
    """``n`` tokens of ~4.5 characters (words, spaces, a paragraph break now and then)."""
    return [("\n\n" if i % 17 == 0 else " ") * (i > 0) + WORDS[i % len(WORDS)] for i in range(n)]


def stream(recorder: Recorder, n: int, rate: float) -> tuple[str, list[float], int, int]:
    """Stream an ``n``-token reply at ``rate`` tokens/s through a new view. Returns the
    text, the times of the messages sent while streaming, their bytes, and the bytes of
    the one message-end HTML op (counted apart: it is the reply rendered once)."""
    recorder.sent.clear()
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    before = len(recorder.custom())  # the header
    pieces = tokens(n)
    for i, event in enumerate(reply_events(pieces)):
        fake.advance(i / rate)
        view(event)
    text = "".join(pieces)
    assert recorder.streamed("text", "a1") == text
    custom = recorder.custom()[before:]
    final_bytes = Sent(0, "", recorder.ops("final")[0]).size
    blocks = block_bytes(custom)
    assert blocks <= 0.25 * len(text)  # the rendered Markdown: a paragraph each 77 characters
    sent = sum(s.size for s in custom) - final_bytes - blocks
    return text, [s.at for s in custom], sent, final_bytes


def block_bytes(custom: list[Sent]) -> int:
    """Bytes of the rendered-Markdown items (``[chars, blocks]``, with their separator),
    measured apart: these tests are about the text's stream (test_markdown_stream.py and
    bench/stream_wire.py measure the rest)."""
    items = [item for s in custom for item in s.data["content"][1:]]
    shorts = [i for i in items if isinstance(i, list) and i and isinstance(i[0], int)]
    return sum(len(json.dumps(i, ensure_ascii=False)) + 2 for i in shorts)


def test_bytes_grow_linearly_and_flushes_stay_under_20_per_s(recorder: Recorder) -> None:
    """100 tokens/s, a typical hosted model: 20,000 tokens take 200 simulated seconds."""
    text, times, sent, final = stream(recorder, 20_000, rate=100)
    text2, _, sent2, _ = stream(recorder, 40_000, rate=100)
    growth = (sent2 / len(text2)) / (sent / len(text))
    assert 1 / 1.3 <= growth <= 1.3  # doubling the reply doubles the bytes
    # Streaming messages (all but the one at the message end) at most 20 in any second.
    assert max_per_window(times[:-1]) <= 20
    assert max_per_window(times) <= 21  # + the flush at the message's end
    # ~450 characters a second: a message when the text waiting has waited LAG on
    # average (about each 2 x LAG = 0.44 s), so the stream costs <= 1.5x its text.
    assert sent / len(text) <= 1.5
    assert 2 * 200 <= len(times) <= 3 * 200
    # Each message costs its text plus a constant (the op's JSON), never the text so far.
    per_message_overhead = (sent - len(text)) / len(times)
    assert per_message_overhead < 50
    assert final < 1.3 * len(text)  # the sanitized HTML, once


def test_flowing_text_is_shown_at_least_every_max_delay(recorder: Recorder) -> None:
    """30 tokens/s, a slow model: ~135 characters a second never fill a message, yet no
    update comes more than MAX_DELAY (0.4 s) after the one before while the text flows."""
    text, times, sent, _ = stream(recorder, 600, rate=30)  # 20 s
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= MAX_DELAY + 1e-6
    assert max_per_window(times[:-1]) <= 5  # fewer, fuller messages than 20 a second
    assert sent / len(text) <= 2.5


def test_a_faster_stream_flushes_as_soon_as_a_message_is_full(recorder: Recorder) -> None:
    """300 tokens/s (~1,350 characters a second): a timed flush goes out once MIN_CHARS
    (384) characters wait, sooner than the lag rule of a slow stream, at most 20 a second."""
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    pieces = tokens(3_000)
    for i, event in enumerate(reply_events(pieces)):
        fake.advance(i / 300)
        view(event)
    texts = [op["text"] for op in recorder.ops("text")]
    times = [s.at for s in recorder.custom()]
    assert "".join(texts) == "".join(pieces)
    inner = texts[1:-1]  # not the leading edge nor the message end
    assert min(map(len, inner)) >= MIN_CHARS - 16  # full, but for a word held back
    assert max(map(len, inner)) <= MIN_CHARS + 16
    assert 3 <= len(times) / 10 <= 4  # ~3.5 a second
    assert max_per_window(times[:-1]) <= 20


def test_bytes_close_to_the_text_for_a_fast_stream(recorder: Recorder) -> None:
    """At 2,000 tokens/s (a fast provider) a flush carries ~450 characters: the batch's
    JSON adds ~10%, 20 times a second."""
    text, times, sent, _ = stream(recorder, 20_000, rate=2_000)
    assert sent / len(text) <= 1.15
    assert max_per_window(times[:-1]) <= 20


def test_without_a_loop_text_waits_for_the_next_event(recorder: Recorder) -> None:
    """No running loop, so no timer: a delta inside the interval waits for a later event
    past it (or for the message end)."""
    fake = FakeTime()
    view = AgentView(HEADER)
    view._outbox.clock = fake.clock  # the default scheduler: no loop, no timer
    recorder.clock = fake.clock
    for i, event in enumerate(reply_events(["a "] * 60)):
        fake.now = i * 0.01
        view(event)
        if i == 10:
            assert not fake.timers
    times = [s.at for s in recorder.custom()]
    # the leading edge, then the first event MAX_DELAY (0.4 s) after it (the lag rule
    # would wait until 0.47 s: deltas from 0.03 s on must wait 0.22 s on average)
    assert times[0] == pytest.approx(0.02)
    assert 0.02 + MAX_DELAY <= times[1] <= 0.43 + 1e-9
    assert max_per_window(times[:-1]) <= 20
    assert recorder.streamed("text", "a1") == "a " * 60


async def test_the_real_loop_timer_throttles(recorder: Recorder) -> None:
    view = AgentView(HEADER, flush_interval=0.05)
    recorder.clock = time.monotonic
    started = time.monotonic()
    events = list(reply_events(["word "] * 400))
    for event in events[:-1]:
        view(event)
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.3)  # the last timer, at most 0.25 s after the last flush
    elapsed = time.monotonic() - started
    times = [s.at for s in recorder.custom()]
    assert recorder.streamed("text", "a1") == "word " * 400  # complete before the end event
    assert max_per_window(times) <= 20
    assert len(times) <= elapsed / 0.05 + 2
    assert len(times) >= 3  # the timer flushed while tokens kept coming
    view(events[-1])


def test_tool_arguments_stream_coalesced(recorder: Recorder) -> None:
    fake = FakeTime()
    view = timed_view(recorder, fake)
    code = "import pandas as pd\n" * 50
    raw = '{"code": ' + repr(code).replace("'", '"') + "}"
    view(update(ToolCallStart(index=0, id="c1", name="run_python")))
    for i in range(0, len(raw), 3):
        fake.advance(fake.now + 0.005)
        view(update(ToolCallDelta(index=0, delta=raw[i : i + 3])))
    call = ToolCall(id="c1", function=FunctionCall(name="run_python", arguments=raw))
    view(update(ToolCallEnd(index=0, call=call)))
    args_ops = recorder.ops("args")
    assert "".join(op["text"] for op in args_ops) == raw
    assert len(args_ops) <= fake.now / 0.05 + 2
    assert recorder.ops("tool")[-1]["args"] == code


def test_a_key_streamed_in_pieces_never_reaches_the_front_end(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIBYAN_VIEW_TEST_API_KEY", KEY)
    fake = FakeTime()
    view = timed_view(recorder, fake)
    view.display()
    view(MessageEnd(message=UserMessage(content=f"use {KEY} please")))  # the prompt
    text = f"Your key is {KEY} and it works.\nAgain:{KEY}"
    pieces = [text[i : i + 2] for i in range(0, len(text), 2)]  # flushes fall inside the key
    for i, event in enumerate(reply_events(pieces)):
        fake.advance(i * 0.02)
        view(event)
        if i == 2 + 13:  # half the key streamed: a forced flush must not release it
            view.show_queued("and then?", "steer")
    view(ToolExecutionStart(call_id="c1", name="run_python", args={"code": f"k = '{KEY}'"}))
    view(ApprovalRequested(call_id="c1", name="run_python", args={"code": f"k = '{KEY}'"}))
    result = ToolMessage(tool_call_id="c1", content=f"printed {KEY}")
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=result, is_error=False))
    view.show_notice(f"notice {KEY}")
    view.finish(
        [UserMessage(content=f"use {KEY} please"), AssistantMessage(content=text)],
        status="completed",
    )
    assert len(recorder.custom()) > 5
    everything = recorder.everything()
    assert KEY not in everything
    assert KEY[:16] not in everything  # not even half of it
    assert recorder.streamed("text", "a1") == text.replace(KEY, "[redacted]")
    assert recorder.ops("blocks")  # rendered from the redacted text (no key in everything)


def test_message_end_flushes_everything_at_once(recorder: Recorder) -> None:
    fake = FakeTime()
    view = timed_view(recorder, fake, flush_interval=10)
    view.display()
    events = list(reply_events(["held", "back"]))
    for event in events[:-1]:
        view(event)
    before = len(recorder.custom())
    view(MessageEnd(message=AssistantMessage(content="heldback")))
    assert len(recorder.custom()) == before + 1
    assert recorder.streamed("text", "a1") == "heldback"
    assert recorder.ops()[-1]["op"] in ("final", "bar")
    view(update(TextDelta(delta="x")))  # a stray delta after the end starts a new message
    view._outbox.flush()
    assert recorder.ops("assistant")[-1]["id"] == "a2"
