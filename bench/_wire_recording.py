"""The recording comm and the fake clock of bench/stream_wire.py (a module of their own to
keep the benchmark readable): every comm message the view sends is measured, the text it
carries and its rendered-Markdown ops counted apart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import comm
from comm.base_comm import BaseComm


class Recording:
    """Replaces ``comm.create_comm``: every comm message is measured (and then dropped, so
    the naive run's gigabyte is not kept)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.block_bytes = 0
        """Bytes of the rendered-Markdown ops (``[chars, *blocks]`` or ``{"op": "blocks"}``),
        part of the streaming bytes."""
        self.sizes: list[tuple[float, int, int, int]] = []
        """(time, bytes, bytes of the message's final HTML op, counted apart, characters of
        streamed text it carries)"""
        recording = self

        class RecordingComm(BaseComm):
            def publish_msg(self, msg_type: str, data: Any = None, *a: Any, **k: Any) -> None:
                if msg_type != "comm_msg":
                    return
                size = len(json.dumps(data, ensure_ascii=False).encode())
                content = data.get("content") if data.get("method") == "custom" else None
                ops = content[1:] if isinstance(content, list) else []
                final = sum(_size(op) for op in ops if isinstance(op, dict) and op["op"] == "final")
                chars = sum(len(op if isinstance(op, str) else op[2]) for op in _deltas(ops))
                blocks = sum(_size(op) for op in ops if _is_blocks(op))
                recording.sizes.append((recording.clock(), size - final, final, chars))
                recording.block_bytes += blocks

        self._previous = comm.create_comm
        comm.create_comm = lambda **kwargs: RecordingComm(**kwargs)

    def close(self) -> None:
        comm.create_comm = self._previous


def _deltas(ops: list[Any]) -> list[Any]:
    """The delta ops of a batch: ``[kind, id, text]`` or a string (one stream here)."""
    return [op for op in ops if isinstance(op, str) or (isinstance(op, list) and _named(op))]


def _named(op: list[Any]) -> bool:
    return bool(op) and isinstance(op[0], str)


def _is_blocks(op: Any) -> bool:
    if isinstance(op, dict):
        return bool(op.get("op") == "blocks")
    return isinstance(op, list) and bool(op) and isinstance(op[0], int)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        entry = (self.now + delay, fn)
        self.timers.append(entry)
        return lambda: self.timers.remove(entry) if entry in self.timers else None

    def advance(self, to: float) -> None:
        while due := sorted((t for t in self.timers if t[0] <= to), key=lambda t: t[0]):
            self.timers.remove(due[0])
            self.now = max(self.now, due[0][0])
            due[0][1]()
        self.now = max(self.now, to)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())
