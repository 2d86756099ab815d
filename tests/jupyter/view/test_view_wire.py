"""The view's wire format and its adaptive throttle, on the outbox alone: what a batch looks
like byte for byte, and that the front end (static/view.js, run by Node when it is there)
reads it back as the ops the kernel meant, replays included."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from view_support import Cursor, FakeTime, unpack

from mibyan_jupyter.jupyter.view.outbox import Batch, Outbox
from mibyan_jupyter.jupyter.view.widget import STATIC

STREAMED = ("text", "thinking", "args")


def outbox(fake: FakeTime, sent: list[Batch], **kwargs: Any) -> Outbox:
    return Outbox(sent.append, clock=fake.clock, schedule=fake.schedule, **kwargs)


def test_a_streamed_reply_costs_its_text_and_a_few_bytes() -> None:
    fake = FakeTime()
    sent: list[Batch] = []
    box = outbox(fake, sent, max_delay=0.25, lag=1.0)  # the lag rule: test_outbox_rate.py
    box.add({"op": "assistant", "id": "a1"}, now=False)
    box.delta("text", "a1", "Hello")  # all held back (no space yet): no message for it
    assert sent == []
    box.delta("text", "a1", " there, ")  # the leading edge: quiet so far
    fake.advance(0.1)
    box.delta("text", "a1", "how ")
    fake.advance(0.3)  # the timer, 0.25 s after the last text
    box.delta("thinking", "a1", "hmm ")
    fake.advance(0.5)
    box.delta("thinking", "a1", "ok ")
    box.delta("text", "a1", "are ")
    box.end_stream("text", "a1")
    box.add({"op": "final", "id": "a1", "html": "<p>Hello</p>"})
    assert sent == [
        [0, {"op": "assistant", "id": "a1"}, ["text", "a1", "Hello there, "]],
        [1, "how "],
        [2, ["thinking", "a1", "hmm "]],
        [
            3,
            "ok ",
            ["text", "a1", "are "],
            [21, "<p20>"],  # the ended text rendered: 21 characters, a paragraph of 20
            {"op": "final", "id": "a1", "html": "<p>Hello</p>"},
        ],
    ]
    assert json.dumps(sent[1]) == '[1, "how "]'  # in a comm message: 33 bytes more


def test_a_timed_flush_waits_for_enough_text_or_the_longest_delay() -> None:
    fake = FakeTime()
    sent: list[Batch] = []
    box = outbox(fake, sent, interval=0.05, max_delay=0.25, min_chars=20, lag=1.0)
    box.delta("text", "a1", "first ")  # leading edge
    fake.advance(0.01)
    box.delta("text", "a1", "a few ")
    assert [t for t, _ in fake.timers] == [pytest.approx(0.25)]
    fake.advance(0.02)
    box.delta("text", "a1", "more words now ")  # 21 characters wait: due at 0.05
    assert [t for t, _ in fake.timers] == [pytest.approx(0.05)]
    fake.advance(0.049)
    assert len(sent) == 1
    fake.advance(0.05)
    assert sent[1] == [1, "a few more words now "]
    fake.advance(0.06)
    box.delta("text", "a1", "slow ")
    fake.advance(0.299)
    assert len(sent) == 2
    fake.advance(0.3)
    assert sent[2] == [2, "slow "]
    assert not fake.timers


def test_structural_ops_go_at_once_and_do_not_delay_the_text() -> None:
    fake = FakeTime()
    sent: list[Batch] = []
    box = outbox(fake, sent)
    box.delta("text", "a1", "one ")
    fake.advance(0.01)
    box.delta("text", "a1", "two ")
    box.add({"op": "tool", "id": "c1", "name": "search"})  # no loop here: at once
    assert sent[-1] == [1, "two ", {"op": "tool", "id": "c1", "name": "search"}]
    fake.advance(0.02)
    box.delta("args", "c1", '{"q": ')  # text went out 0.01 s ago: this one waits
    assert len(sent) == 2
    fake.advance(0.3)
    assert sent[-1] == [2, ["args", "c1", '{"q": ']]


def run_scenario() -> tuple[list[Batch], list[Batch]]:
    """Interleaved streams, a tail held past later ops, a restart; returns the batches
    sent and what a late front end receives: everything again, from a replay."""
    fake = FakeTime()
    sent: list[Batch] = []
    box = outbox(fake, sent, min_chars=8)
    box.add({"op": "header", "title": "t"}, now=False)
    box.add({"op": "assistant", "id": "a1"}, now=False)
    for i, (kind, ident, text) in enumerate(
        [
            ("thinking", "a1", "Let me see "),
            ("thinking", "a1", 'what "it" is\n'),
            ("text", "a1", "It is "),
            ("text", "a1", "sk-not-a-secre"),
            ("args", "c1", '{"path": '),
            ("text", "a1", "t, then "),
            ("args", "c1", '"a.txt"}'),
            ("text", "a1", "done ✓ "),
        ]
    ):
        fake.advance(i * 0.07)
        box.delta(kind, ident, text)
        if i == 4:
            box.add({"op": "tool", "id": "c1", "name": "read"})
    box.end_stream("args", "c1")
    box.add({"op": "clear", "id": "a1", "calls": ["c1"]})
    box.delta("text", "a1", "again")
    box.end_stream("text", "a1")
    box.flush()
    late = list(sent)
    box.replay(0)
    return sent[: len(late)], sent[len(late) :]


def test_the_wire_reads_back_as_the_ops_in_order() -> None:
    batches, replayed = run_scenario()
    assert replayed == batches
    cursor = Cursor()
    ops = [op for batch in batches for op in unpack(batch, cursor) or []]
    assert [unpack(batch, cursor) for batch in replayed] == [None] * len(replayed)
    streamed: dict[tuple[str, str], str] = {}
    for op in ops:
        if op["op"] in ("text", "thinking", "args"):
            key = (op["op"], op["id"])
            streamed[key] = streamed.get(key, "") + op["text"]
    assert streamed == {
        ("thinking", "a1"): 'Let me see what "it" is\n',
        ("text", "a1"): "It is sk-not-a-secret, then done ✓ again",
        ("args", "c1"): '{"path": "a.txt"}',
    }
    assert [op["op"] for op in ops if op["op"] not in STREAMED] == [
        "header",
        "assistant",
        "tool",
        "clear",
        "blocks",  # the text, rendered when it ended
    ]
    # A delta names its element only when it switches to another one.
    target = None
    for item in (item for batch in batches for item in batch[1:]):
        if isinstance(item, list) and isinstance(item[0], str):
            assert tuple(item[:2]) != target
            target = tuple(item[:2])
        elif isinstance(item, str):
            assert target is not None
    assert sum(isinstance(item, str) for batch in batches for item in batch) >= 2


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_view_js_unpacks_the_wire_as_the_kernel_meant() -> None:
    """The front end's own ``unpack`` (static/view.js, no page needed) on the scenario's
    batches, a replay, a stray batch and junk: the same ops as the Python mirror."""
    batches, replayed = run_scenario()
    stream = [*batches[:3], batches[5], *batches[3:], *replayed, {"seq": 9}, "x", None]
    cursor = Cursor()
    expected = [unpack(batch, cursor) for batch in stream]
    script = """
        import { readFileSync } from "node:fs";
        const source = readFileSync(process.argv[1], "utf8");
        const url = "data:text/javascript," + encodeURIComponent(source);
        const { unpack, default: widget } = await import(url);
        const cursor = { next: 0, target: null };
        const stream = JSON.parse(readFileSync(0, "utf8"));
        console.log(JSON.stringify({
            render: typeof widget.render,
            ops: stream.map((batch) => unpack(batch, cursor)),
        }));
    """
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script, str(STATIC / "view.js")],
        input=json.dumps(stream),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["render"] == "function"
    assert result["ops"] == expected
    assert expected[3] is None  # out of order: dropped, then applied when its turn comes
    assert sum(ops is not None for ops in expected) == len(batches)
