"""The Anthropic Messages stream parser: SSE events in, our normalized stream events out.

A pure state machine, no I/O, so it can be fed a recorded stream split anywhere. Anthropic
streams one *content block* at a time (``content_block_start`` / ``_delta`` / ``_stop``,
addressed by a block index); our events and :class:`AssistantMessage` are flatter, so:

* text blocks join into one ``content`` string; a text block that follows some other block
  (a tool call, a server tool, thinking) is set off by a blank line, which is emitted as a
  delta too, so the live view and the final message agree. Back-to-back text blocks (how
  citations arrive) join as they are;
* tool-call indexes count our tool calls (0..n-1), not Anthropic's block indexes, because
  server tool blocks (``server_tool_use``, ``web_search_tool_result``...) run on Anthropic's
  side and are skipped here;
* ``message_delta`` usage counts are cumulative, so they replace what ``message_start`` said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic_core import from_json

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
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from mibyan_jupyter.providers.base import SseEvent
from mibyan_jupyter.providers.errors import (
    ErrorKind,
    ProviderError,
    classify_status,
    classify_stream_error,
)

API: Final = "anthropic_messages"

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "error",
}

_ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "api_error": "server_error",
    "authentication_error": "auth",
    "not_found_error": "model_not_found",
    "request_too_large": "payload_too_large",
    "billing_error": "billing",
    "timeout_error": "timeout",
}


def map_stop_reason(raw: str | None) -> StopReason:
    """Our stop reason for Anthropic's; an unknown or missing one is a normal stop (new
    reasons appear over time and should not fail a finished reply)."""
    return _STOP_REASONS.get(raw or "", "stop")


def error_kind(error_type: str, message: str) -> ErrorKind:
    """Classify an Anthropic error ``type`` (the same types in HTTP error bodies and in
    ``event: error``). Bad requests and permission errors are told apart by their message:
    "prompt is too long" is a context overflow, "credit balance is too low" is billing."""
    if error_type == "invalid_request_error":
        return classify_status(400, message, error_type)
    if error_type == "permission_error":
        return classify_status(403, message, error_type)
    return _ERROR_KINDS.get(error_type) or classify_stream_error(message, error_type or None)


def json_object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class _Block:
    kind: Literal["text", "thinking", "redacted", "tool", "ignored"]
    parts: list[str] = field(default_factory=list)
    secret: str | None = None
    """The signature of a thinking block, the data of a redacted one."""
    call: int = -1
    call_id: str = ""
    name: str = ""


class AnthropicParser:
    """Feeds on decoded SSE events of one ``/messages`` response (see the module doc)."""

    __slots__ = ("_blocks", "_done", "_model", "_open", "_prev", "_started", "_stop", "_usage")

    def __init__(self, model: str) -> None:
        self._model = model
        self._started = False
        self._done = False
        self._stop: str | None = None
        self._blocks: list[_Block] = []  # in stream order, server tool blocks left out
        self._open: dict[int, _Block] = {}
        self._prev = ""  # kind of the previous block, to set text blocks apart
        self._usage = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}

    @property
    def done(self) -> bool:
        return self._done

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        try:
            return self._dispatch(json_object(from_json(event.data)), event.event)
        except (ValueError, TypeError):  # invalid JSON, or a field of the wrong type
            raise ProviderError("format_error", f"malformed {event.event!r} stream event") from None

    def _dispatch(self, payload: dict[str, Any], event_name: str) -> list[StreamEvent]:
        kind = payload.get("type") or event_name
        out: list[StreamEvent] = []
        if kind == "content_block_delta":
            block = self._open.get(payload.get("index", -1))
            if block is not None:
                self._delta(block, json_object(payload.get("delta")), out)
        elif kind == "content_block_start":
            self._begin(payload.get("index", -1), json_object(payload.get("content_block")), out)
        elif kind == "content_block_stop":
            block = self._open.pop(payload.get("index", -1), None)
            if block is not None:
                self._end(block, out)
        elif kind == "message_start":
            message = json_object(payload.get("message"))
            self._model = message.get("model") or self._model
            self._take_usage(json_object(message.get("usage")))
            self._ensure_started(out)
        elif kind == "message_delta":
            self._stop = json_object(payload.get("delta")).get("stop_reason") or self._stop
            self._take_usage(json_object(payload.get("usage")))
        elif kind == "message_stop":
            for block in list(self._open.values()):  # never left open by Anthropic; be safe
                self._end(block, out)
            self._open.clear()
            self._done = True
        elif kind == "error":
            error = json_object(payload.get("error"))
            error_type = str(error.get("type") or "")
            text = str(error.get("message") or "error event in the stream")
            raise ProviderError(error_kind(error_type, text), text, code=error_type or None)
        return out  # ping and unknown events produce nothing

    def _ensure_started(self, out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(StreamStart(model=self._model, api=API))

    def _begin(self, index: int, start: dict[str, Any], out: list[StreamEvent]) -> None:
        self._ensure_started(out)
        btype = start.get("type")
        if btype == "text":
            block = _Block("text")
            out.append(TextStart())
            if self._prev not in ("", "text") and any(
                b.kind == "text" and b.parts for b in self._blocks
            ):
                self._text(block, "\n\n", out)
            self._text(block, start.get("text") or "", out)
        elif btype == "thinking":
            block = _Block("thinking", secret=start.get("signature") or None)
            out.append(ThinkingStart())
            self._thinking(block, start.get("thinking") or "", out)
        elif btype == "redacted_thinking":
            block = _Block("redacted", secret=start.get("data"))
            out.append(ThinkingStart())
        elif btype == "tool_use":
            calls = sum(1 for b in self._blocks if b.kind == "tool")
            block = _Block(
                "tool", call=calls, call_id=start.get("id", ""), name=start.get("name", "")
            )
            out.append(ToolCallStart(index=calls, id=block.call_id, name=block.name))
            if start.get("input"):  # a non-streamed block carries its input whole
                self._arguments(block, json.dumps(start["input"]), out)
        else:  # server tools and their results run on Anthropic's side
            self._open[index] = _Block("ignored")
            self._prev = str(btype)
            return
        self._open[index] = block
        self._blocks.append(block)
        self._prev = block.kind

    def _delta(self, block: _Block, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        dtype = delta.get("type")
        if dtype == "text_delta" and block.kind == "text":
            self._text(block, delta.get("text") or "", out)
        elif dtype == "input_json_delta" and block.kind == "tool":
            self._arguments(block, delta.get("partial_json") or "", out)
        elif dtype == "thinking_delta" and block.kind == "thinking":
            self._thinking(block, delta.get("thinking") or "", out)
        elif dtype == "signature_delta" and block.kind == "thinking":
            block.secret = (block.secret or "") + (delta.get("signature") or "")
        # citations_delta and deltas of ignored blocks: nothing to show

    @staticmethod
    def _text(block: _Block, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(TextDelta(delta=text))

    @staticmethod
    def _thinking(block: _Block, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(ThinkingDelta(delta=text))

    @staticmethod
    def _arguments(block: _Block, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(ToolCallDelta(index=block.call, delta=text))

    def _end(self, block: _Block, out: list[StreamEvent]) -> None:
        if block.kind == "text":
            out.append(TextEnd())
        elif block.kind == "thinking":
            out.append(ThinkingEnd(signature=block.secret))
        elif block.kind == "redacted":
            out.append(ThinkingEnd(encrypted=block.secret, redacted=True))
        elif block.kind == "tool":
            out.append(ToolCallEnd(index=block.call, call=_tool_call(block)))

    def _take_usage(self, usage: dict[str, Any]) -> None:
        for key, name in (
            ("input_tokens", "input"),
            ("output_tokens", "output"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_write"),
        ):
            value = usage.get(key)
            if isinstance(value, int):
                self._usage[name] = value

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise ProviderError("format_error", "the stream ended before message_stop")
        stop = map_stop_reason(self._stop)
        error = f"the model stopped with {self._stop!r}" if stop == "error" else None
        return self._message(stop, error)

    def partial(self) -> AssistantMessage:
        return self._message("aborted")

    def _message(self, stop: StopReason, error: str | None = None) -> AssistantMessage:
        blocks = self._blocks
        u = self._usage
        total = u["input"] + u["output"] + u["cache_read"] + u["cache_write"]
        return AssistantMessage(
            content="".join(p for b in blocks if b.kind == "text" for p in b.parts) or None,
            tool_calls=tuple(_tool_call(b) for b in blocks if b.kind == "tool"),
            thinking=tuple(_thinking(b) for b in blocks if b.kind in ("thinking", "redacted")),
            stop_reason=stop,
            usage=Usage(total=total, **u),
            error_message=error,
            model=self._model,
            api=API,
        )


def _tool_call(block: _Block) -> ToolCall:
    """The call with its arguments text as streamed; no fragments at all means ``{}``."""
    arguments = "".join(block.parts)
    if not arguments.strip():
        arguments = "{}"
    return ToolCall(id=block.call_id, function=FunctionCall(name=block.name, arguments=arguments))


def _thinking(block: _Block) -> Thinking:
    if block.kind == "redacted":
        return Thinking(redacted=True, encrypted=block.secret)
    return Thinking(text="".join(block.parts), signature=block.secret)
