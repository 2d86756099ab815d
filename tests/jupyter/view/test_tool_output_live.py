"""A running tool's output on its card: written from any thread, flushed by a timer thread
at most 20 times a second, redacted with a secret split across writes never sent in
halves, capped per call, its last part sent before the result, nothing after the call's
end; and through the view, translate's ToolExecutionUpdate chunks become tool_output ops."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from view_support import Recorder, record_comms

from mibyan_jupyter.core.events import ToolExecutionEnd, ToolExecutionStart, ToolExecutionUpdate
from mibyan_jupyter.core.messages import ToolMessage
from mibyan_jupyter.core.tools import ToolResult
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.jupyter.view.tool_output import CUT_NOTE, ToolOutputPump
from mibyan_jupyter.secrets import REDACT

SECRET = "sk-live-0123456789abcdefSECRET"


class Sink:
    """The outbox's two calls, recorded: ops queued, and the flushes that send them."""

    def __init__(self) -> None:
        self.queued: list[dict[str, Any]] = []
        self.messages: list[tuple[float, list[dict[str, Any]]]] = []
        self.lock = threading.Lock()

    def add(self, op: Any) -> None:
        with self.lock:
            self.queued.append(dict(op))

    def flush(self) -> None:
        with self.lock:
            batch, self.queued = self.queued, []
            if batch:
                self.messages.append((time.monotonic(), batch))

    def text(self) -> str:
        return "".join(op["text"] for _, batch in self.messages for op in batch)


@pytest.fixture(autouse=True)
def secret() -> None:
    REDACT.add(SECRET)


def test_writes_from_a_thread_flush_at_most_20_times_a_second() -> None:
    sink = Sink()
    pump = ToolOutputPump(sink.add, sink.flush)

    def printer() -> None:
        for n in range(4_000):
            pump.write("c1", "stdout", f"line {n}\n")
            if n % 100 == 0:
                time.sleep(0.01)

    thread = threading.Thread(target=printer)
    started = time.monotonic()
    thread.start()
    thread.join()
    pump.end("c1")
    sink.flush()
    elapsed = time.monotonic() - started
    assert sink.text() == "".join(f"line {n}\n" for n in range(4_000))
    times = [at for at, _ in sink.messages]
    gaps = [b - a for a, b in itertools.pairwise(times[:-1])]  # the last is end()'s
    assert len(times) >= 3, "output flowed while the thread printed, not only at the end"
    assert min(gaps) >= 0.045, gaps
    assert len(times) <= elapsed * 20 + 2


def test_a_secret_printed_in_two_writes_is_never_sent_in_halves() -> None:
    sink = Sink()
    pump = ToolOutputPump(sink.add, sink.flush, interval=0.01)
    pump.write("c1", "stdout", "the key is " + SECRET[:10])
    time.sleep(0.1)  # a timed flush happens between the two halves
    pump.write("c1", "stdout", SECRET[10:] + " and more\n")
    time.sleep(0.1)
    pump.end("c1")
    sink.flush()
    sent = [op["text"] for _, batch in sink.messages for op in batch]
    assert len(sink.messages) >= 2
    assert all(SECRET[:10] not in text and SECRET[10:] not in text for text in sent), sent
    assert sink.text() == "the key is [redacted] and more\n"


def test_output_is_capped_per_call_with_one_line_saying_so() -> None:
    sink = Sink()
    pump = ToolOutputPump(sink.add, sink.flush, limit=1_000)
    for _ in range(100):
        pump.write("c1", "stdout", "x" * 99 + "\n")
    pump.end("c1")
    sink.flush()
    assert sink.text() == ("x" * 99 + "\n") * 10 + CUT_NOTE


def test_the_last_output_is_queued_at_the_end_and_later_writes_are_dropped() -> None:
    sink = Sink()
    pump = ToolOutputPump(sink.add, sink.flush, interval=10)  # no timed flush in this test
    pump.write("c1", "stdout", "first\n")
    time.sleep(0.05)  # the first write after a quiet spell goes out at once
    pump.write("c1", "stderr", "oops: no newline")
    pump.end("c1")
    assert sink.queued == [
        {"op": "tool_output", "id": "c1", "stream": "stderr", "text": "oops: no newline"}
    ]
    pump.write("c1", "stdout", "a background child, after the end\n")
    sink.flush()
    assert sink.text() == "first\noops: no newline"


def test_the_view_shows_update_chunks_and_thread_writes_before_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder: Recorder = record_comms(monkeypatch)
    view = AgentView(ViewHeader("t", "s-1", "demo", demo=True, context_window=1000))
    view(ToolExecutionStart(call_id="c1", name="run_shell", args={"command": "ls"}))
    chunk = ToolResult(content=f"key {SECRET}\n", details={"stream": "stdout"})
    view(ToolExecutionUpdate(call_id="c1", name="run_shell", partial=chunk))
    cumulative = ToolResult(content="not a chunk: no stream")
    view(ToolExecutionUpdate(call_id="c1", name="run_shell", partial=cumulative))
    writer = threading.Thread(target=view.tool_output, args=("c1", "stderr", "warn\n"))
    writer.start()
    writer.join()
    result = ToolMessage(tool_call_id="c1", name="run_shell", content="done")
    view(ToolExecutionEnd(call_id="c1", name="run_shell", result=result, is_error=False))
    view.finish([], status="completed")
    ops = recorder.ops()
    kinds = [op["op"] for op in ops]
    outputs = [op for op in ops if op["op"] == "tool_output"]
    assert [(op["stream"], op["text"]) for op in outputs] == [
        ("stdout", "key [redacted]\n"),
        ("stderr", "warn\n"),
    ]
    assert kinds.index("result") > max(i for i, k in enumerate(kinds) if k == "tool_output")
    assert SECRET not in recorder.everything()


def test_a_tool_the_stop_button_ended_shows_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder: Recorder = record_comms(monkeypatch)
    view = AgentView(ViewHeader("t", "s-1", "demo", demo=True, context_window=1000))
    view(ToolExecutionStart(call_id="c1", name="run_python", args={"code": "sleep"}))
    result = ToolMessage(
        tool_call_id="c1", name="run_python", content="Stopped", details={"stopped": True}
    )
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=result, is_error=True))
    view.finish([], status="stopped")
    statuses = [op["status"] for op in recorder.ops() if op["op"] == "status"]
    assert statuses[-1] == "stopped"
