"""What the Chat Completions and Responses adapters share.

Both OpenAI wire formats report errors the same way, take the same headers, refuse a tool
call without its result (and a result without its call), and turn a stream into the same
start/delta/end grammar. Keeping that here lets the two adapters read side by side as
"only what differs": the request shapes and the event names of each stream.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from pydantic_core import from_json

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    StopReason,
    Thinking,
    ToolCall,
    ToolMessage,
    Usage,
)
from mibyan_jupyter.core.safe_text import clean_text
from mibyan_jupyter.core.stream import (
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingLevel,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from mibyan_jupyter.core.transcript import unique_call_id

from .errors import ProviderError, classify_stream_error

JsonObject = dict[str, Any]

EFFORT: dict[ThinkingLevel, str] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",  # few models take "xhigh"; request.options can still ask for it
}

MISSING_RESULT = "No result: the tool call was interrupted before it ran."


def headers(api_key: str | None) -> dict[str, str]:
    """JSON in, an event stream out; a bearer token only when there is a key (local servers
    often need none, and an empty ``Bearer`` confuses some proxies)."""
    result = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        result["Authorization"] = f"Bearer {api_key}"
    return result


def merge_options(body: JsonObject, options: Mapping[str, Any], reserved: frozenset[str]) -> None:
    """Merge ``request.options`` (temperature, top_p, a server's extras...) into the body; the
    keys that make the request a streamed call of this model are not theirs to change."""
    for key, value in options.items():
        if key not in reserved:
            body[key] = value


def new_call_id() -> str:
    """For a tool call streamed without an id: its result must name one."""
    return f"call_{uuid.uuid4().hex[:24]}"


def sendable(messages: Sequence[Message]) -> Iterator[Message]:
    """The messages a server will accept: aborted or failed replies are left out, a tool
    result answering no call that is sent is dropped, and a call left without a result (a
    turn cut short) gets an error result, because both APIs reject an unpaired call."""
    pending: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            if pending.pop(message.tool_call_id, None) is not None:
                yield message
            continue
        if pending:
            yield from _missing_results(pending)
            pending = {}
        if isinstance(message, AssistantMessage):
            if not message.sendable:
                continue
            pending = {call.id: call.function.name for call in message.tool_calls}
        yield message
    yield from _missing_results(pending)


def _missing_results(pending: dict[str, str]) -> Iterator[ToolMessage]:
    for call_id, name in pending.items():
        yield ToolMessage(tool_call_id=call_id, name=name, content=MISSING_RESULT, is_error=True)


# -- errors ----------------------------------------------------------------------------------


def _code(value: object) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _clip(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def error_fields(data: object, fallback: str) -> tuple[str, str | None]:
    """(message, code) of an OpenAI-style error object: ``{"error": {"message", "type",
    "code"}}``, a flat ``{"message", "code"}`` (vLLM, Responses ``error`` events) or
    ``{"detail": ...}``; OpenRouter's ``metadata.raw`` is appended because its own message
    ("Provider returned error") says nothing."""
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return _clip(fallback), None
    err = data.get("error")
    src: dict[str, Any] = err if isinstance(err, dict) else data
    message = src.get("message")
    if not isinstance(message, str) or not message:
        message = err if isinstance(err, str) and err else data.get("detail")
    if not isinstance(message, str) or not message:
        message = fallback
    metadata = src.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and raw and raw not in message:
        message = f"{message}: {raw}"
    code = src.get("code")  # a string code says most; an HTTP status as code says least
    named = code if isinstance(code, str) and code else None
    return _clip(message), named or _code(src.get("type")) or _code(code)


def error_message(status: int, body: str) -> tuple[str, str | None]:
    """(message, code) from an HTTP error response body, JSON or plain text."""
    text = body.strip()
    if not text:
        return f"HTTP {status} with an empty body", None
    try:
        data = json.loads(text)
    except ValueError:
        return _clip(text), None
    return error_fields(data, text)


def stream_error(payload: object, fallback: str) -> ProviderError:
    """The error a server reports inside a stream that started with HTTP 200."""
    message, code = error_fields(payload, fallback)
    return ProviderError(classify_stream_error(message, code), message, code=code)


def error_event(data: str) -> ProviderError:
    """An ``event: error`` whose data may or may not be JSON."""
    try:
        payload: object = json.loads(data)
    except ValueError:
        payload = None
    return stream_error(payload, data.strip() or "error event without details")


def load_object(data: str) -> JsonObject:
    """One event's JSON payload; anything else means the stream is not what we expect.

    ``pydantic_core.from_json`` parses a typical chunk three times faster than
    ``json.loads``, which matters at tens of thousands of chunks per reply; the few texts it
    refuses that ``json`` accepts (a lone surrogate escape) get a second chance there.
    """
    try:
        value = from_json(data)
    except ValueError:
        try:
            value = json.loads(data)
        except ValueError:
            message = f"invalid JSON in the stream: {_clip(data, 200)}"
            raise ProviderError("format_error", message) from None
    if not isinstance(value, dict):
        raise ProviderError("format_error", f"unexpected JSON in the stream: {_clip(data, 200)}")
    return value


def count(data: Mapping[str, Any] | None, key: str) -> int:
    """A token count from a usage object (missing, null or odd values count as 0)."""
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, int) and value > 0 else 0


# -- the reply being streamed ----------------------------------------------------------------

_TEXT = "text"
_THINKING = "thinking"


class _Block:
    __slots__ = ("encrypted", "parts", "signature")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.signature: str | None = None
        self.encrypted: str | None = None


class _Call:
    __slots__ = ("ended", "id", "name", "parts", "wire_id")

    def __init__(self, call_id: str, wire_id: str, name: str) -> None:
        self.id = call_id
        """Unique within the conversation (see :func:`unique_call_id`)."""
        self.wire_id = wire_id
        """The id the server sent, which its later fragments repeat."""
        self.name = name
        self.parts: list[str] = []
        self.ended = False

    def tool_call(self) -> ToolCall:
        """The finished call, its text valid Unicode (an emoji split into two surrogate
        escapes across fragments is joined; a lone one replaced: core/safe_text.py)."""
        arguments = clean_text("".join(self.parts))
        function = FunctionCall(name=clean_text(self.name), arguments=arguments)
        return ToolCall(id=clean_text(self.id), function=function)


class MessageBuilder:
    """Accumulates one assistant reply and emits our event grammar for it: ``StreamStart``
    once, text and thinking parts opened before their first delta and closed when another
    part begins, tool calls numbered 0..n-1 in order of appearance, each ended once with its
    complete arguments. The wire parsers only say what arrived."""

    __slots__ = ("_calls", "_ids", "_open", "_started", "_text", "_thinking", "api", "model")

    def __init__(self, model: str, api: str, *, taken: AbstractSet[str] = frozenset()) -> None:
        """``taken``: ids earlier replies of the conversation use; a call reusing one is
        renamed like a repeat within the reply (see :func:`unique_call_id`)."""
        self.model = model
        self.api = api
        self._started = False
        self._open: str | None = None
        self._text: list[str] = []
        self._thinking: list[_Block] = []
        self._calls: list[_Call] = []
        self._ids: set[str] = set(taken)

    def start(self, out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(StreamStart(model=self.model, api=self.api))

    @property
    def calls(self) -> int:
        return len(self._calls)

    def text(self, delta: str, out: list[StreamEvent]) -> None:
        if self._open is not _TEXT:
            self.close(out)
            out.append(TextStart())
            self._open = _TEXT
        self._text.append(delta)
        out.append(TextDelta(delta=delta))

    def end_text(self, out: list[StreamEvent]) -> None:
        if self._open is _TEXT:
            self._open = None
            out.append(TextEnd())

    def open_thinking(self, out: list[StreamEvent]) -> None:
        self.close(out)
        self._thinking.append(_Block())
        self._open = _THINKING
        out.append(ThinkingStart())

    def thinking(self, delta: str, out: list[StreamEvent]) -> None:
        if self._open is not _THINKING:
            self.open_thinking(out)
        self._thinking[-1].parts.append(delta)
        out.append(ThinkingDelta(delta=delta))

    @property
    def thinking_streamed(self) -> bool:
        """Whether the open thinking block got any delta."""
        return self._open is _THINKING and bool(self._thinking[-1].parts)

    @property
    def thinking_open(self) -> bool:
        return self._open is _THINKING

    @property
    def thinking_index(self) -> int:
        """The index of the last thinking block (-1 when there is none)."""
        return len(self._thinking) - 1

    def seal_thinking(
        self, index: int, *, signature: str | None = None, encrypted: str | None = None
    ) -> None:
        """Set the id and encrypted content of a thinking block already ended (its item
        finished after another part began); the final message carries them."""
        block = self._thinking[index]
        block.signature, block.encrypted = signature, encrypted

    def end_thinking(
        self, out: list[StreamEvent], *, signature: str | None = None, encrypted: str | None = None
    ) -> None:
        if self._open is not _THINKING:
            self.open_thinking(out)
        block = self._thinking[-1]
        block.signature, block.encrypted = signature, encrypted
        self._open = None
        out.append(ThinkingEnd(signature=signature, encrypted=encrypted))

    def close(self, out: list[StreamEvent]) -> None:
        """End the open text or thinking part, if any."""
        if self._open is _TEXT:
            out.append(TextEnd())
        elif self._open is _THINKING:
            out.append(ThinkingEnd())
        self._open = None

    def start_call(self, call_id: str, name: str, out: list[StreamEvent]) -> int:
        """A new call; an id an earlier call of this reply has is made unique."""
        self.close(out)
        index = len(self._calls)
        unique = clean_text(unique_call_id(call_id, self._ids))
        self._calls.append(_Call(unique, call_id, name))
        out.append(ToolCallStart(index=index, id=unique, name=clean_text(name)))
        return index

    def call_id(self, index: int) -> str:
        """The id the server sent for call ``index`` (before it was made unique)."""
        return self._calls[index].wire_id

    def name_call(self, index: int, name: str) -> None:
        """A name that came after the call's first delta (some servers split them)."""
        if not self._calls[index].name:
            self._calls[index].name = name

    def call_delta(self, index: int, delta: str, out: list[StreamEvent]) -> None:
        call = self._calls[index]
        if not call.ended:  # what ToolCallEnd said stays the truth
            call.parts.append(delta)
            out.append(ToolCallDelta(index=index, delta=delta))

    def end_call(self, index: int, out: list[StreamEvent], arguments: str | None = None) -> None:
        call = self._calls[index]
        if call.ended:
            return
        if arguments is not None:
            call.parts = [arguments]
        call.ended = True
        out.append(ToolCallEnd(index=index, call=call.tool_call()))

    def close_all(self, out: list[StreamEvent]) -> None:
        self.close(out)
        for index in range(len(self._calls)):
            self.end_call(index, out)

    def message(
        self, stop_reason: StopReason, usage: Usage, error_message: str | None = None
    ) -> AssistantMessage:
        return AssistantMessage(
            content="".join(self._text) or None,
            tool_calls=tuple(call.tool_call() for call in self._calls),
            thinking=tuple(
                Thinking(text="".join(b.parts), signature=b.signature, encrypted=b.encrypted)
                for b in self._thinking
            ),
            stop_reason=stop_reason,
            usage=usage,
            error_message=error_message,
            model=self.model,
            api=self.api,
        )
