"""One model call: consume a stream function's events, emit message events, return the
final assistant message.

Whatever happens — the stream fails, the stream function breaks its contract and raises,
the call is cancelled — this returns an assistant message (stop reason ``error`` or
``aborted`` in the bad cases) and the MessageStart/MessageEnd pair is complete.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable

from mibyan_jupyter.core.events import MessageEnd, MessageStart, MessageUpdate
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    StopReason,
    Thinking,
    ToolCall,
    Usage,
)
from mibyan_jupyter.core.stream import (
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

from .partial_json import parse_partial
from .scope import RunScope


class PartialMessage:
    """Accumulates deltas; ``snapshot()`` builds the partial message without validation."""

    __slots__ = ("_calls", "_text", "_thinking", "api", "model")

    def __init__(self, model: str, api: str | None = None) -> None:
        self.model = model
        self.api = api
        self._text: list[str] = []
        self._thinking: list[tuple[list[str], ThinkingEnd | None]] = []
        self._calls: dict[int, tuple[str, str, list[str], ToolCall | None]] = {}

    def apply(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.delta)
        elif isinstance(event, ThinkingStart):
            self._thinking.append(([], None))
        elif isinstance(event, ThinkingDelta):
            if not self._thinking:
                self._thinking.append(([], None))
            self._thinking[-1][0].append(event.delta)
        elif isinstance(event, ThinkingEnd):
            if not self._thinking:
                self._thinking.append(([], None))
            self._thinking[-1] = (self._thinking[-1][0], event)
        elif isinstance(event, ToolCallStart):
            self._calls[event.index] = (event.id, event.name, [], None)
        elif isinstance(event, ToolCallDelta):
            if event.index in self._calls:
                self._calls[event.index][2].append(event.delta)
        elif isinstance(event, ToolCallEnd):
            call_id, name, parts, _ = self._calls.get(
                event.index, (event.call.id, event.call.function.name, [], None)
            )
            self._calls[event.index] = (call_id, name, parts, event.call)
        elif isinstance(event, StreamStart):
            self.model = event.model or self.model
            self.api = event.api or self.api

    def arguments_text(self, index: int) -> str:
        """The arguments text of tool call ``index`` so far."""
        entry = self._calls.get(index)
        return "".join(entry[2]) if entry is not None else ""

    def snapshot(
        self, stop_reason: StopReason = "stop", error_message: str | None = None
    ) -> AssistantMessage:
        thinking = tuple(
            Thinking.model_construct(
                text="".join(parts),
                signature=end.signature if end else None,
                encrypted=end.encrypted if end else None,
                redacted=end.redacted if end else False,
            )
            for parts, end in self._thinking
        )
        calls = tuple(
            final
            or ToolCall.model_construct(
                id=call_id,
                type="function",
                function=FunctionCall.model_construct(name=name, arguments="".join(parts)),
            )
            for call_id, name, parts, final in (self._calls[i] for i in sorted(self._calls))
        )
        return AssistantMessage.model_construct(
            content="".join(self._text) or None,
            tool_calls=calls,
            thinking=thinking,
            stop_reason=stop_reason,
            usage=Usage(),
            error_message=error_message,
            error_kind=None,
            model=self.model,
            api=self.api,
            timestamp=time.time(),
        )


_DELTA_TYPES = (
    StreamStart,
    TextStart,
    TextDelta,
    TextEnd,
    ThinkingStart,
    ThinkingDelta,
    ThinkingEnd,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
)


class ModelCall:
    """Runs one request through ``stream_fn``. ``cancelled_externally`` is set when the
    call was cancelled without the signal being aborted (task cancellation)."""

    __slots__ = ("_emit", "_partial", "_signal", "_started", "_stream_fn", "cancelled_externally")

    def __init__(self, scope: RunScope) -> None:
        self._stream_fn = scope.stream_fn
        self._signal = scope.signal
        self._emit = scope.emit
        self._partial: PartialMessage | None = None
        self._started = False
        self.cancelled_externally = False

    async def run(
        self,
        request: ModelRequest,
        finalize: Callable[[AssistantMessage], AssistantMessage] | None = None,
    ) -> AssistantMessage:
        """The final message; ``finalize`` may rewrite it before MessageEnd is emitted."""
        self._partial = PartialMessage(request.model)
        with self._signal.interruptible():
            try:
                final = await self._consume(request)
            except asyncio.CancelledError:
                if not self._signal.absorb_cancel():
                    self.cancelled_externally = True
                final = self._partial.snapshot("aborted", self._signal.reason or "aborted")
            except Exception as error:  # a stream function that broke its contract
                final = self._partial.snapshot("error", f"{type(error).__name__}: {error}")
        if finalize is not None:
            final = finalize(final)
        if not self._started:
            self._started = True
            await self._emit(MessageStart(message=final))
        await self._emit(MessageEnd(message=final))
        return final

    async def _consume(self, request: ModelRequest) -> AssistantMessage:
        assert self._partial is not None
        partial = self._partial
        if self._signal.aborted:
            return partial.snapshot("aborted", self._signal.reason)
        produced = self._stream_fn(request, self._signal)
        if inspect.isawaitable(produced):
            return await produced
        stream: AsyncIterator[StreamEvent] = produced
        try:
            async for event in stream:
                if isinstance(event, StreamDone | StreamError):
                    return event.message
                if isinstance(event, _DELTA_TYPES):
                    partial.apply(event)
                    if isinstance(event, ToolCallDelta) and event.arguments is None:
                        # Progressively parsed arguments for live display; O(length) per
                        # delta, like the partial snapshot itself.
                        parsed = parse_partial(partial.arguments_text(event.index))
                        event = event.model_copy(update={"arguments": parsed})
                    if not self._started:
                        self._started = True
                        await self._emit(MessageStart(message=partial.snapshot()))
                    if not isinstance(event, StreamStart):
                        await self._emit(MessageUpdate(message=partial.snapshot(), event=event))
                else:
                    # A retry or failover starts the reply over: what streamed so far is
                    # dropped (the notice tells subscribers to clear it too).
                    partial = self._partial = PartialMessage(request.model)
                    await self._emit(event)
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()
        return partial.snapshot("error", "the model stream ended without a final message")
