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
* ``message_delta`` usage counts are cumulative, so they replace what ``message_start`` said;
* every block is also kept as the API sent it (server tool blocks included), because a reply
  that stops with ``pause_turn`` must be sent back as-is for the model to continue its turn:
  the parser of the continuation starts from the paused one (``resume``), so the final
  message is the whole turn (calls numbered on, usage of both requests added up).
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from typing import Any, Final

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    StopReason,
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
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from mibyan_jupyter.core.transcript import unique_call_id
from mibyan_jupyter.providers._anthropic_blocks import (
    StreamBlock,
    apply_raw,
    close_raw,
    json_object,
    loads,
    map_stop_reason,
    thinking_of,
    tool_call,
)
from mibyan_jupyter.providers.base import SseEvent
from mibyan_jupyter.providers.errors import (
    ErrorKind,
    ProviderError,
    classify_status,
    classify_stream_error,
)

API: Final = "anthropic_messages"


def error_kind(error_type: str, message: str) -> ErrorKind:
    """Classify an Anthropic error ``type`` (the same types in HTTP error bodies and in
    ``event: error``); see :func:`~.errors.classify_stream_error`. Bad requests and
    permission errors are told apart by their message: "prompt is too long" is a context
    overflow, "credit balance is too low" is billing."""
    if error_type == "permission_error":
        return classify_status(403, message, error_type)
    return classify_stream_error(message, error_type or None)


class AnthropicParser:
    """Feeds on decoded SSE events of one ``/messages`` response (see the module doc)."""

    __slots__ = (
        "_before",
        "_blocks",
        "_done",
        "_model",
        "_open",
        "_prev",
        "_raw",
        "_started",
        "_stop",
        "_taken",
        "_usage",
    )

    def __init__(
        self,
        model: str,
        *,
        resume: AnthropicParser | None = None,
        taken: AbstractSet[str] = frozenset(),
    ) -> None:
        """``resume``: the parser of a reply that stopped with ``pause_turn``, which this
        response continues. ``taken``: the call ids earlier replies of the conversation use,
        which a new call's id must not repeat (see :func:`unique_call_id`)."""
        self._taken = frozenset(taken)
        self._model = model
        self._started = False
        self._done = False
        self._stop: str | None = None
        self._blocks: list[StreamBlock] = []  # in stream order, server tool blocks left out
        self._raw: list[StreamBlock] = []  # every block in stream order, server tool blocks too
        self._open: dict[int, StreamBlock] = {}
        self._prev = ""  # kind of the previous block, to set text blocks apart
        self._usage = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        self._before = Usage()  # what the paused requests this one continues used
        if resume is not None:
            self._started = True  # one reply to the loop: no second StreamStart
            self._blocks, self._raw = list(resume._blocks), list(resume._raw)
            self._prev, self._before = resume._prev, resume.usage

    @property
    def done(self) -> bool:
        return self._done

    @property
    def paused(self) -> bool:
        """The reply stopped with ``pause_turn``: the model wants to go on with its turn
        (a long server-tool loop); send :meth:`content_blocks` back to let it."""
        return self._done and self._stop == "pause_turn"

    @property
    def usage(self) -> Usage:
        """Tokens so far, of this response and the paused ones it continues."""
        u = self._usage
        total = u["input"] + u["output"] + u["cache_read"] + u["cache_write"]
        return self._before + Usage(total=total, **u)

    def content_blocks(self) -> list[dict[str, Any]]:
        """The reply's content blocks as the API sent them, server tool blocks included,
        for the assistant message of a continuation request (fields without a value left
        out)."""
        return [{k: v for k, v in b.raw.items() if v is not None} for b in self._raw]

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        try:
            return self._dispatch(json_object(loads(event.data)), event.event)
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
        raw = dict(start)
        if btype == "text":
            block = StreamBlock("text", raw)
            out.append(TextStart())
            if self._prev not in ("", "text") and any(
                b.kind == "text" and b.parts for b in self._blocks
            ):
                self._text(block, "\n\n", out)
            self._text(block, start.get("text") or "", out)
        elif btype == "thinking":
            block = StreamBlock("thinking", raw, secret=start.get("signature") or None)
            out.append(ThinkingStart())
            self._thinking(block, start.get("thinking") or "", out)
        elif btype == "redacted_thinking":
            block = StreamBlock("redacted", raw, secret=start.get("data"))
            out.append(ThinkingStart())
        elif btype == "tool_use":
            tools = [b for b in self._blocks if b.kind == "tool"]
            wire_id, name = start.get("id", ""), start.get("name", "")
            if not isinstance(wire_id, str) or not isinstance(name, str):
                raise TypeError("a tool_use block needs a string id and name")
            call_id = clean_text(unique_call_id(wire_id, {b.call_id for b in tools} | self._taken))
            raw["id"] = call_id  # a continuation sends the block back with the same id
            block = StreamBlock(
                "tool", raw, call=len(tools), call_id=call_id, name=clean_text(name)
            )
            out.append(ToolCallStart(index=block.call, id=block.call_id, name=block.name))
            if start.get("input"):  # a non-streamed block carries its input whole
                self._arguments(block, json.dumps(start["input"]), out)
        else:  # server tools and their results run on Anthropic's side
            block = self._open[index] = StreamBlock("ignored", raw)
            self._raw.append(block)
            self._prev = str(btype)
            return
        self._open[index] = block
        self._blocks.append(block)
        self._raw.append(block)
        self._prev = block.kind

    def _delta(self, block: StreamBlock, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        dtype = delta.get("type")
        apply_raw(block, delta)
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
    def _text(block: StreamBlock, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(TextDelta(delta=text))

    @staticmethod
    def _thinking(block: StreamBlock, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(ThinkingDelta(delta=text))

    @staticmethod
    def _arguments(block: StreamBlock, text: str, out: list[StreamEvent]) -> None:
        if text:
            block.parts.append(text)
            out.append(ToolCallDelta(index=block.call, delta=text))

    def _end(self, block: StreamBlock, out: list[StreamEvent]) -> None:
        close_raw(block)
        if block.kind == "text":
            out.append(TextEnd())
        elif block.kind == "thinking":
            out.append(ThinkingEnd(signature=block.secret))
        elif block.kind == "redacted":
            out.append(ThinkingEnd(encrypted=block.secret, redacted=True))
        elif block.kind == "tool":
            out.append(ToolCallEnd(index=block.call, call=tool_call(block)))

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
        return AssistantMessage(
            content="".join(p for b in blocks if b.kind == "text" for p in b.parts) or None,
            tool_calls=tuple(tool_call(b) for b in blocks if b.kind == "tool"),
            thinking=tuple(thinking_of(b) for b in blocks if b.kind in ("thinking", "redacted")),
            stop_reason=stop,
            usage=self.usage,
            error_message=error,
            model=self._model,
            api=API,
        )
