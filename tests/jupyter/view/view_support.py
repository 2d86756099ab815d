"""Helpers for the view's tests: a comm that records what the kernel would send, a fake
clock with a fake timer, and ways to read the recorded ops back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from mibyan_jupyter.core.events import MessageEnd, MessageStart, MessageUpdate
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.stream import StreamEvent, TextDelta, TextEnd, TextStart
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

HEADER = ViewHeader(
    title="Explore the data", session_id="s-1234", model="demo", demo=True, context_window=1000
)


@dataclass
class Sent:
    """One message the kernel published on the widget's comm."""

    at: float
    msg_type: str
    data: dict[str, Any]

    @property
    def size(self) -> int:
        """Bytes of the message's data as the kernel's session serializes it."""
        return len(json.dumps(self.data, ensure_ascii=False).encode())


@dataclass
class Recorder:
    sent: list[Sent] = field(default_factory=list)
    clock: Callable[[], float] = lambda: 0.0
    on_custom: Callable[[dict[str, Any]], None] | None = None

    def batches(self) -> list[list[Any]]:
        """The view's custom messages (``[seq, op, ...]``) as sent, in order."""
        return [s.data["content"] for s in self.custom()]

    def custom(self) -> list[Sent]:
        return [
            s for s in self.sent if s.msg_type == "comm_msg" and s.data.get("method") == "custom"
        ]

    def unpacked(self) -> list[list[dict[str, Any]]]:
        """The ops of each batch a front end applies, as objects (see :func:`unpack`)."""
        cursor = Cursor()
        return [ops for batch in self.batches() if (ops := unpack(batch, cursor)) is not None]

    def ops(self, kind: str | None = None) -> list[dict[str, Any]]:
        ops = [op for batch in self.unpacked() for op in batch]
        return ops if kind is None else [op for op in ops if op["op"] == kind]

    def kinds(self) -> list[str]:
        return [op["op"] for op in self.ops()]

    def streamed(self, kind: str, ident: str) -> str:
        return "".join(op["text"] for op in self.ops(kind) if op["id"] == ident)

    def everything(self) -> str:
        """Every message sent, as one JSON text (to look for what must never be sent)."""
        return "\n".join(json.dumps(s.data, ensure_ascii=False) for s in self.sent)


@dataclass
class Cursor:
    next: int = 0
    target: tuple[str, str] | None = None


def unpack(batch: Any, cursor: Cursor) -> list[dict[str, Any]] | None:
    """What ``unpack`` in static/view.js does (test_view_wire.py runs both on the same
    batches): the batch's ops as objects, a delta as ``{"op": kind, "id", "text"}``; ``None``
    when it is not the batch ``cursor`` expects."""
    if not isinstance(batch, list) or not batch or batch[0] != cursor.next:
        return None
    cursor.next += 1
    ops: list[dict[str, Any]] = []
    for item in batch[1:]:
        if isinstance(item, str):
            if cursor.target is not None:
                ops.append({"op": cursor.target[0], "id": cursor.target[1], "text": item})
        elif isinstance(item, list) and isinstance(item[0], int):  # [chars, blocks]
            if cursor.target is not None and cursor.target[0] == "text":
                ops.append(
                    {"op": "blocks", "id": cursor.target[1], "chars": item[0], "blocks": item[1]}
                )
        elif isinstance(item, list):
            cursor.target = (item[0], item[1])
            ops.append({"op": item[0], "id": item[1], "text": item[2]})
        elif isinstance(item, dict):
            ops.append(item)
    return ops


def record_comms(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Widgets created from now on publish into the returned recorder, not a kernel."""
    record = Recorder()

    class RecordingComm(BaseComm):
        def publish_msg(
            self,
            msg_type: str,
            data: Any = None,
            metadata: Any = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            record.sent.append(Sent(record.clock(), msg_type, data or {}))
            custom = msg_type == "comm_msg" and bool(data) and data.get("method") == "custom"
            if custom and record.on_custom is not None:
                record.on_custom(data["content"])

    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))
    return record


class FakeTime:
    """A clock and a one-timer-at-a-time scheduler that the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        entry = (self.now + delay, fn)
        self.timers.append(entry)
        return lambda: self.timers.remove(entry) if entry in self.timers else None

    def advance(self, to: float) -> None:
        """Move the clock to ``to``, running the timers due on the way, in order."""
        while self.timers:
            entry = min(self.timers, key=lambda timer: timer[0])
            if entry[0] > to:
                break
            self.timers.remove(entry)
            self.now = max(self.now, entry[0])
            entry[1]()
        self.now = max(self.now, to)


def timed_view(recorder: Recorder, fake: FakeTime, **kwargs: Any) -> AgentView:
    view = AgentView(HEADER, **kwargs)
    outbox = view._outbox
    outbox.clock = fake.clock
    outbox.schedule = fake.schedule
    recorder.clock = fake.clock
    return view


def reply_events(text_pieces: list[str]) -> Iterator[Any]:
    """A streamed assistant reply as agent events. The partial message they carry is a
    small constant: the view must read only the deltas."""
    partial = AssistantMessage(content="(partial)")
    yield MessageStart(message=partial)
    yield MessageUpdate(message=partial, event=TextStart())
    for piece in text_pieces:  # built unvalidated: 20,000 of them are built per test
        delta = TextDelta.model_construct(delta=piece)
        yield MessageUpdate.model_construct(message=partial, event=delta)
    yield MessageUpdate(message=partial, event=TextEnd())
    yield MessageEnd(message=AssistantMessage(content="".join(text_pieces)))


def update(event: StreamEvent) -> MessageUpdate:
    return MessageUpdate(message=AssistantMessage(), event=event)


def click(view: AgentView, content: dict[str, Any]) -> None:
    """What the front end's ``model.send(content)`` does, as the kernel receives it."""
    view._widget.comm.handle_msg(
        {"content": {"data": {"method": "custom", "content": content}}, "buffers": []}
    )


def max_per_window(times: list[float], window: float = 1.0) -> int:
    """The largest number of ``times`` inside any half-open window of ``window`` seconds
    (a hair shorter, so float sums like 20 x 0.05 do not count one flush twice)."""
    times = sorted(times)
    best = 0
    start = 0
    for end, t in enumerate(times):
        while t - times[start] >= window - 1e-9:
            start += 1
        best = max(best, end - start + 1)
    return best
