"""Models that need no provider: a scripted model and a function model.

Both stream like a real provider (start, thinking, text and tool-call argument deltas in
chunks of ``chunk_size`` characters, ``delay`` seconds apart, then done with usage), so the
loop, the store and the view are exercised exactly as with a real model. The scripted
model also backs the no-key demo (see :mod:`.demo_model`).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .messages import AssistantMessage, FunctionCall, StopReason, Thinking, ToolCall, Usage
from .signal import AbortSignal
from .stream import (
    ModelRequest,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)


@dataclass(frozen=True)
class Call:
    """A scripted tool call. ``arguments`` may be a mapping or raw (possibly bad) JSON."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        return (
            self.arguments if isinstance(self.arguments, str) else json.dumps(dict(self.arguments))
        )


@dataclass(frozen=True)
class Reply:
    """One scripted assistant reply."""

    text: str = ""
    thinking: str = ""
    calls: Sequence[Call] = ()
    stop_reason: StopReason | None = None
    """Defaults to ``tool_use`` when there are calls, else ``stop``."""
    usage: Usage | None = None
    error: str | None = None
    """Make the stream fail with this message (stop reason ``error``)."""
    thinking_signature: str | None = None


ReplyLike: TypeAlias = Reply | str
ReplyFn: TypeAlias = Callable[[ModelRequest], ReplyLike | Awaitable[ReplyLike]]


def _chunks(text: str, size: int) -> Iterable[str]:
    if size <= 0:
        yield text
        return
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _default_usage(reply: Reply, request: ModelRequest) -> Usage:
    output = max(1, (len(reply.text) + len(reply.thinking)) // 4 + 8 * len(reply.calls))
    return Usage(input=100, output=output, total=100 + output, cost=0.0)


class _Streamer:
    """Turns a :class:`Reply` into provider-like stream events."""

    def __init__(self, name: str, chunk_size: int, delay: float) -> None:
        self.name = name
        self.chunk_size = chunk_size
        self.delay = delay
        self._ids = itertools.count(1)

    async def _pause(self) -> None:
        if self.delay > 0:
            await asyncio.sleep(self.delay)

    async def stream(self, reply: Reply, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamStart(model=self.name, api="fake")
        thinking: tuple[Thinking, ...] = ()
        if reply.thinking:
            yield ThinkingStart()
            for piece in _chunks(reply.thinking, self.chunk_size):
                await self._pause()
                yield ThinkingDelta(delta=piece)
            yield ThinkingEnd(signature=reply.thinking_signature)
            thinking = (Thinking(text=reply.thinking, signature=reply.thinking_signature),)
        if reply.text:
            yield TextStart()
            for piece in _chunks(reply.text, self.chunk_size):
                await self._pause()
                yield TextDelta(delta=piece)
            yield TextEnd()
        calls = []
        for index, scripted in enumerate(reply.calls):
            call_id = scripted.id or f"call_{next(self._ids)}"
            yield ToolCallStart(index=index, id=call_id, name=scripted.name)
            text = scripted.arguments_text()
            for piece in _chunks(text, self.chunk_size):
                await self._pause()
                yield ToolCallDelta(index=index, delta=piece)
            call = ToolCall(id=call_id, function=FunctionCall(name=scripted.name, arguments=text))
            calls.append(call)
            yield ToolCallEnd(index=index, call=call)
        stop = reply.stop_reason or ("tool_use" if calls else "stop")
        message = AssistantMessage(
            content=reply.text or None,
            tool_calls=tuple(calls),
            thinking=thinking,
            stop_reason="error" if reply.error else stop,
            usage=reply.usage or _default_usage(reply, request),
            error_message=reply.error,
            model=self.name,
            api="fake",
        )
        yield StreamError(message=message) if reply.error else StreamDone(message=message)


def _as_reply(value: ReplyLike) -> Reply:
    return Reply(text=value) if isinstance(value, str) else value


class ScriptedModel:
    """A queue of replies, one per model call. Use it as a stream function.

    ``requests`` records what each call was asked (with a copy of the messages) when
    ``record`` is true; turn it off to measure the loop alone.
    """

    def __init__(
        self,
        replies: Iterable[ReplyLike] = (),
        *,
        chunk_size: int = 8,
        delay: float = 0.0,
        name: str = "scripted",
        record: bool = True,
    ) -> None:
        self._replies = [_as_reply(r) for r in replies]
        self._next = 0
        self._streamer = _Streamer(name, chunk_size, delay)
        self.record = record
        self.requests: list[ModelRequest] = []

    def add(self, *replies: ReplyLike) -> None:
        self._replies.extend(_as_reply(r) for r in replies)

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    def __call__(self, request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        if self.record:
            self.requests.append(_frozen_copy(request))
        if self._next >= len(self._replies):
            return _error_stream(self._streamer.name, "the scripted model has no more replies")
        reply = self._replies[self._next]
        self._next += 1
        return self._streamer.stream(reply, request)


class FunctionModel:
    """A callable decides each reply from the request (sync or async)."""

    def __init__(
        self, fn: ReplyFn, *, chunk_size: int = 8, delay: float = 0.0, name: str = "function"
    ) -> None:
        self._fn = fn
        self._streamer = _Streamer(name, chunk_size, delay)

    async def __call__(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        value = self._fn(request)
        reply = _as_reply(await value if inspect.isawaitable(value) else value)
        async for event in self._streamer.stream(reply, request):
            yield event


async def _error_stream(name: str, text: str) -> AsyncIterator[StreamEvent]:
    yield StreamError(
        message=AssistantMessage(stop_reason="error", error_message=text, model=name, api="fake")
    )


def _frozen_copy(request: ModelRequest) -> ModelRequest:
    return ModelRequest(
        model=request.model,
        system_prompt=request.system_prompt,
        messages=tuple(request.messages),
        tools=tuple(request.tools),
        thinking_level=request.thinking_level,
        max_tokens=request.max_tokens,
        tool_choice=request.tool_choice,
        options=dict(request.options),
        notes=tuple(request.notes),
    )
