"""One model call: consume a stream function's events, emit message events, return the
final assistant message.

Whatever happens — the stream fails, the stream function breaks its contract and raises,
the call is cancelled — this returns an assistant message (stop reason ``error`` or
``aborted`` in the bad cases) and the MessageStart/MessageEnd pair is complete.

Per delta the work is constant, whatever the reply's length: the delta is cleaned
(``safe_stream``), appended to the partial message, and passed on in a ``MessageUpdate``
whose partial message (and a tool call's parsed arguments) are built only if a subscriber
reads them (docs/architecture.md, "Streaming").
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from functools import partial as bind
from typing import Any

from mibyan_jupyter.core.events import MessageEnd, MessageStart, MessageUpdate
from mibyan_jupyter.core.messages import AssistantMessage, StopReason
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

from .partial import PartialMessage
from .partial_json import parse_partial
from .safe_stream import DeltaCleaner, clean_message
from .scope import RunScope

__all__ = ["ModelCall", "PartialMessage"]


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


BUDGET_STOP_TEXT = "the budget cannot pay for another attempt of this call"


def _parsed_arguments(partial: PartialMessage, index: int, mark: int) -> Any:
    return parse_partial(partial.arguments_text(index, at=mark))


class ModelCall:
    """Runs one request through ``stream_fn``. ``cancelled_externally`` is set when the
    call was cancelled without the signal being aborted (task cancellation)."""

    __slots__ = (
        "_cleaner",
        "_emit",
        "_may_go_on",
        "_partial",
        "_signal",
        "_started",
        "_stream_fn",
        "cancelled_externally",
    )

    def __init__(self, scope: RunScope) -> None:
        self._stream_fn = scope.stream_fn
        self._signal = scope.signal
        self._emit = scope.emit
        self._partial = PartialMessage("")
        self._cleaner = DeltaCleaner()
        self._started = False
        self._may_go_on: Callable[[Any], bool] | None = None
        self.cancelled_externally = False

    async def run(
        self,
        request: ModelRequest,
        finalize: Callable[[AssistantMessage], AssistantMessage] | None = None,
        may_go_on: Callable[[Any], bool] | None = None,
    ) -> AssistantMessage:
        """The final message; ``finalize`` may rewrite it before MessageEnd is emitted.
        ``may_go_on`` sees each retry or failover notice (before the next attempt is
        made): ``False`` ends the call there, as a failed reply of ``error_kind``
        ``"budget"`` (the budget gate cannot pay for another attempt)."""
        self._restart(request)
        self._may_go_on = may_go_on
        with self._signal.interruptible():
            try:
                final = await self._consume(request)
            except asyncio.CancelledError:
                if not self._signal.absorb_cancel():
                    self.cancelled_externally = True
                final = self._cut_short("aborted", self._signal.reason or "aborted")
            except Exception as error:  # a stream function that broke its contract
                final = self._cut_short("error", f"{type(error).__name__}: {error}")
        final = clean_message(final)  # the stream function built it from the raw deltas
        if finalize is not None:
            final = finalize(final)
        if not self._started:
            self._started = True
            await self._emit(MessageStart(message=final))
        await self._emit(MessageEnd(message=final))
        return final

    def _restart(self, request: ModelRequest) -> None:
        self._partial = PartialMessage(request.model)
        self._cleaner = DeltaCleaner()

    def _cut_short(self, stop_reason: StopReason, error_message: str | None) -> AssistantMessage:
        """The partial message as the final one, with what the cleaner held back."""
        for event in self._cleaner.release():
            self._partial.apply(event)
        return self._partial.snapshot(stop_reason, error_message)

    async def _consume(self, request: ModelRequest) -> AssistantMessage:
        if self._signal.aborted:
            return self._partial.snapshot("aborted", self._signal.reason)
        produced = self._stream_fn(request, self._signal)
        if inspect.isawaitable(produced):
            return await produced
        stream: AsyncIterator[StreamEvent] = produced
        try:
            async for event in stream:
                if isinstance(event, StreamDone | StreamError):
                    return event.message
                if isinstance(event, _DELTA_TYPES):
                    for clean in self._cleaner.clean(event):
                        await self._pass_on(clean)
                else:
                    # A retry or failover starts the reply over: what streamed so far is
                    # dropped (the notice tells subscribers to clear it too).
                    self._restart(request)
                    await self._emit(event)
                    if self._may_go_on is not None and not self._may_go_on(event):
                        return self._cut_short("error", BUDGET_STOP_TEXT).model_copy(
                            update={"error_kind": "budget"}
                        )
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()
        return self._cut_short("error", "the model stream ended without a final message")

    async def _pass_on(self, event: StreamEvent) -> None:
        """Apply one clean delta and emit it; nothing here grows with the reply's length."""
        partial = self._partial
        partial.apply(event)
        mark = partial.mark
        if isinstance(event, ToolCallDelta) and event.arguments is None:
            # Parsed arguments for live display, parsed only if someone reads them.
            parse = bind(_parsed_arguments, partial, event.index, mark)
            event = ToolCallDelta.deferring(
                {"arguments": parse}, index=event.index, delta=event.delta
            )
        if not self._started:
            self._started = True
            await self._emit(MessageStart(message=partial.snapshot()))
        if not isinstance(event, StreamStart):
            snapshot = bind(partial.snapshot, at=mark)
            await self._emit(MessageUpdate.deferring({"message": snapshot}, event=event))
