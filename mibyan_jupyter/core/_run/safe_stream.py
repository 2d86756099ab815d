"""Streamed text made safe before any subscriber or the final message sees it.

Why here: a provider may split an emoji's surrogate pair across two deltas (a JSON
``"\\ud83d"`` escape ends one chunk, ``"\\ude00"`` starts the next), or send a lone
surrogate; either, once in the transcript, made every later request and store write of the
session fail. The loop is the one place every stream function's events pass, so it cleans
them here: one :class:`~mibyan_jupyter.core.safe_text.SurrogateJoiner` per content block
(the text, each thinking block, each tool call's arguments) rejoins a split pair and turns a
lone surrogate into U+FFFD; the final message the stream function built from the raw deltas
is cleaned the same way (docs/architecture.md, "Decisions").
"""

from __future__ import annotations

from mibyan_jupyter.core.messages import AssistantMessage, FunctionCall, Thinking, ToolCall
from mibyan_jupyter.core.safe_text import SurrogateJoiner, clean_text
from mibyan_jupyter.core.stream import (
    StreamEvent,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)


class DeltaCleaner:
    """Turns one stream event into the clean events to pass on (none while a high
    surrogate waits for its other half; an extra delta when a block's end releases one)."""

    __slots__ = ("_calls", "_text", "_thinking")

    def __init__(self) -> None:
        self._text = SurrogateJoiner()
        self._thinking = SurrogateJoiner()
        self._calls: dict[int, SurrogateJoiner] = {}

    def clean(self, event: StreamEvent) -> list[StreamEvent]:
        if isinstance(event, TextDelta):
            return _delta(event, self._text.feed(event.delta))
        if isinstance(event, ThinkingDelta):
            return _delta(event, self._thinking.feed(event.delta))
        if isinstance(event, ToolCallDelta):
            joiner = self._calls.setdefault(event.index, SurrogateJoiner())
            return _delta(event, joiner.feed(event.delta))
        if isinstance(event, TextEnd):
            return [*self._release_text(), event]
        if isinstance(event, ThinkingStart | ThinkingEnd):
            return [*self._release_thinking(), event]
        if isinstance(event, ToolCallStart):
            return [*self._release_call(event.index), event]
        if isinstance(event, ToolCallEnd):
            return [*self._release_call(event.index), _clean_end(event)]
        return [event]

    def release(self) -> list[StreamEvent]:
        """What every block still holds back, as deltas (the stream ended without closing
        them: an abort, an error)."""
        held = [*self._release_text(), *self._release_thinking()]
        for index in tuple(self._calls):
            held += self._release_call(index)
        return held

    def _release_text(self) -> list[StreamEvent]:
        text = self._text.flush()
        return [TextDelta(delta=text)] if text else []

    def _release_thinking(self) -> list[StreamEvent]:
        text = self._thinking.flush()
        return [ThinkingDelta(delta=text)] if text else []

    def _release_call(self, index: int) -> list[StreamEvent]:
        joiner = self._calls.pop(index, None)
        text = joiner.flush() if joiner is not None else ""
        return [ToolCallDelta(index=index, delta=text)] if text else []


def _delta(event: TextDelta | ThinkingDelta | ToolCallDelta, clean: str) -> list[StreamEvent]:
    if clean is event.delta:
        return [event]  # the common case: no copy
    return [event.model_copy(update={"delta": clean})] if clean else []


def _clean_call(call: ToolCall) -> ToolCall:
    arguments, name = clean_text(call.function.arguments), clean_text(call.function.name)
    if arguments is call.function.arguments and name is call.function.name:
        return call
    function = FunctionCall.model_construct(name=name, arguments=arguments)
    return call.model_copy(update={"function": function})


def _clean_end(event: ToolCallEnd) -> ToolCallEnd:
    call = _clean_call(event.call)
    return event if call is event.call else event.model_copy(update={"call": call})


def _clean_thinking(block: Thinking) -> Thinking:
    text = clean_text(block.text)
    return block if text is block.text else block.model_copy(update={"text": text})


def clean_message(message: AssistantMessage) -> AssistantMessage:
    """``message`` with lone surrogates replaced and split pairs joined in its text,
    thinking and tool calls (signatures are kept verbatim: they go back byte for byte);
    the same object when it was clean (one regex scan per text)."""
    content = clean_text(message.content) if message.content is not None else None
    calls = tuple(_clean_call(call) for call in message.tool_calls)
    thinking = tuple(_clean_thinking(block) for block in message.thinking)
    error = clean_text(message.error_message) if message.error_message is not None else None
    unchanged = (
        content is message.content
        and error is message.error_message
        and all(a is b for a, b in zip(calls, message.tool_calls, strict=True))
        and all(a is b for a, b in zip(thinking, message.thinking, strict=True))
    )
    if unchanged:
        return message
    return message.model_copy(
        update={
            "content": content,
            "tool_calls": calls,
            "thinking": thinking,
            "error_message": error,
        }
    )
