"""The assistant message being streamed, kept so that any moment of it can be rebuilt.

Why not a snapshot per delta: building the partial message joins all the text so far, so
doing it at every delta made a reply's cost quadratic (80k tokens took 20 s of loop CPU).
Instead each applied event gets a **mark** (a counter); a part of text remembers the mark it
arrived at, and :meth:`PartialMessage.snapshot` builds the message as it was at any mark,
when someone asks (docs/architecture.md, "Streaming"). Applying an event is O(1); a
snapshot is one join per block, cached for the newest mark.
"""

from __future__ import annotations

import time
from bisect import bisect_right

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    StopReason,
    Thinking,
    ToolCall,
    Usage,
)
from mibyan_jupyter.core.stream import (
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)


class _Run:
    """A growing text (the reply's text, one thinking block, one call's arguments): its
    parts, the mark each arrived at, and the newest join."""

    __slots__ = ("_joined", "_joined_count", "marks", "opened", "parts")

    def __init__(self, opened: int) -> None:
        self.opened = opened
        self.parts: list[str] = []
        self.marks: list[int] = []
        self._joined = ""
        self._joined_count = 0

    def add(self, text: str, mark: int) -> None:
        self.parts.append(text)
        self.marks.append(mark)

    def text(self, at: int) -> str:
        """The text as it was at mark ``at``."""
        count = len(self.parts)
        if count and self.marks[-1] > at:
            count = bisect_right(self.marks, at)
        if count == self._joined_count:
            return self._joined
        if count < self._joined_count:  # an older moment: join it, keep the newest cached
            return "".join(self.parts[:count])
        self._joined += "".join(self.parts[self._joined_count : count])
        self._joined_count = count
        return self._joined


class _Thinking:
    __slots__ = ("end", "ended", "run")

    def __init__(self, opened: int) -> None:
        self.run = _Run(opened)
        self.end: ThinkingEnd | None = None
        self.ended = 0


class _Call:
    __slots__ = ("final", "finished", "id", "name", "run")

    def __init__(self, call_id: str, name: str, opened: int) -> None:
        self.id = call_id
        self.name = name
        self.run = _Run(opened)
        self.final: ToolCall | None = None
        self.finished = 0


class PartialMessage:
    """Accumulates deltas; ``snapshot()`` builds the partial message without validation,
    as it is now or as it was at an earlier :attr:`mark`."""

    __slots__ = ("_cache", "_calls", "_mark", "_started", "_text", "_thinking", "api", "model")

    def __init__(self, model: str, api: str | None = None) -> None:
        self._started = time.time()
        self.model = model
        self.api = api
        self._mark = 0
        self._text = _Run(0)
        self._thinking: list[_Thinking] = []
        self._calls: dict[int, _Call] = {}
        self._cache: tuple[int, AssistantMessage] | None = None

    @property
    def mark(self) -> int:
        """The moment after the last applied event (0 before any)."""
        return self._mark

    def apply(self, event: StreamEvent) -> None:
        self._mark += 1
        mark = self._mark
        if isinstance(event, TextDelta):
            self._text.add(event.delta, mark)
        elif isinstance(event, ThinkingStart):
            self._thinking.append(_Thinking(mark))
        elif isinstance(event, ThinkingDelta):
            self._open_thinking().run.add(event.delta, mark)
        elif isinstance(event, ThinkingEnd):
            block = self._open_thinking()
            block.end, block.ended = event, mark
        elif isinstance(event, ToolCallStart):
            self._calls[event.index] = _Call(event.id, event.name, mark)
        elif isinstance(event, ToolCallDelta):
            if event.index in self._calls:
                self._calls[event.index].run.add(event.delta, mark)
        elif isinstance(event, ToolCallEnd):
            call = self._calls.get(event.index)
            if call is None:
                call = self._calls[event.index] = _Call(
                    event.call.id, event.call.function.name, mark
                )
            call.final, call.finished = event.call, mark
        elif isinstance(event, StreamStart):
            self.model = event.model or self.model
            self.api = event.api or self.api

    def _open_thinking(self) -> _Thinking:
        if not self._thinking:
            self._thinking.append(_Thinking(self._mark))
        return self._thinking[-1]

    def arguments_text(self, index: int, at: int | None = None) -> str:
        """The arguments text of tool call ``index`` so far (or at mark ``at``)."""
        call = self._calls.get(index)
        return call.run.text(self._mark if at is None else at) if call is not None else ""

    def snapshot(
        self,
        stop_reason: StopReason = "stop",
        error_message: str | None = None,
        *,
        at: int | None = None,
    ) -> AssistantMessage:
        """The message now, or as it was at mark ``at``; the plain "now" one is cached until
        the next event, so every subscriber that reads it shares one build."""
        at = self._mark if at is None else at
        plain = stop_reason == "stop" and error_message is None
        if plain and self._cache is not None and self._cache[0] == at:
            return self._cache[1]
        message = AssistantMessage.model_construct(
            content=self._text.text(at) or None,
            tool_calls=self._calls_at(at),
            thinking=self._thinking_at(at),
            stop_reason=stop_reason,
            usage=Usage(),
            error_message=error_message,
            error_kind=None,
            model=self.model,
            api=self.api,
            timestamp=self._started,  # one moment per message, whenever it is built
        )
        if plain and at == self._mark:
            self._cache = (at, message)
        return message

    def _thinking_at(self, at: int) -> tuple[Thinking, ...]:
        blocks = []
        for block in self._thinking:
            if block.run.opened > at:
                break
            end = block.end if block.end is not None and block.ended <= at else None
            blocks.append(
                Thinking.model_construct(
                    text=block.run.text(at),
                    signature=end.signature if end else None,
                    encrypted=end.encrypted if end else None,
                    redacted=end.redacted if end else False,
                )
            )
        return tuple(blocks)

    def _calls_at(self, at: int) -> tuple[ToolCall, ...]:
        calls = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if call.run.opened > at:
                continue
            if call.final is not None and call.finished <= at:
                calls.append(call.final)
                continue
            function = FunctionCall.model_construct(name=call.name, arguments=call.run.text(at))
            calls.append(ToolCall.model_construct(id=call.id, type="function", function=function))
        return tuple(calls)
