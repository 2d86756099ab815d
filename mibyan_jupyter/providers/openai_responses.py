"""The Responses wire format (``codex_responses``), spoken statelessly.

Stateless, the way OpenAI's Codex CLI speaks it: ``store: false`` and the whole history
inline on every request, so no ``previous_response_id`` and nothing kept server side. What
a reasoning model thought survives between requests only as ``encrypted_content``, which we
ask for (``include``) and send back verbatim before the reply it led to.

Item ids are not sent back. An id is a reference the server checks: a reasoning id it
cannot resolve is "not found" under ``store: false``, and an ``fc_`` id sent without the
reasoning item it was paired with is rejected. Sending no ids at all, as OpenAI's own Codex
CLI does, avoids both. The reasoning item id is still kept (in ``Thinking.signature``).

Encrypted reasoning is only requested from reasoning models: others (gpt-4o, gpt-4.1,
gpt-5-chat) answer ``include`` with HTTP 400 "Encrypted content is not supported with this
model". We recognise them by name or by a thinking level other than ``off``;
``options={"include": [...]}`` overrides the guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, assert_never

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    Content,
    ImagePart,
    Message,
    StopReason,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent, ThinkingLevel, ToolSpec

from . import _openai_common as common
from ._responses_reasoning import ReasoningItems
from .base import ApiMode, SseEvent
from .errors import ProviderError
from .notes import add_responses_notes

JsonObject = common.JsonObject

_RESERVED = frozenset({"model", "input", "stream"})
_REASONING_MODEL = re.compile(r"(?:^|/)(?:o[1-9]|gpt-5|gpt-oss|codex)", re.IGNORECASE)
_STOP: dict[str, StopReason] = {
    "completed": "stop",
    "incomplete": "length",
    "max_output_tokens": "length",
    "content_filter": "error",
    "failed": "error",
    "cancelled": "aborted",
}
_STOP_MESSAGES = {"content_filter": "The provider's content filter stopped the reply."}


def _reasoning_model(model_id: str, level: ThinkingLevel) -> bool:
    return level != "off" or (
        bool(_REASONING_MODEL.search(model_id)) and "-chat" not in model_id.lower()
    )


class ResponsesAdapter:
    api: ApiMode = "codex_responses"
    path: str = "/responses"

    def build_body(
        self, request: ModelRequest, model_id: str, *, prompt_caching: bool
    ) -> dict[str, Any]:
        """``prompt_caching`` needs nothing here: OpenAI caches prefixes alone."""
        conversation = self.convert_messages(request.system_prompt, request.messages)
        add_responses_notes(conversation["input"], request.notes)  # after the transcript
        body: JsonObject = {
            "model": model_id,
            **conversation,
            "stream": True,
            "store": False,
        }
        if _reasoning_model(model_id, request.thinking_level):
            body["include"] = ["reasoning.encrypted_content"]
        if request.tools:
            body["tools"] = self.convert_tools(request.tools)
            if request.tool_choice == "none":
                body["tool_choice"] = "none"
        if request.max_tokens:
            body["max_output_tokens"] = request.max_tokens
        if request.thinking_level != "off":
            body["reasoning"] = {"effort": common.EFFORT[request.thinking_level], "summary": "auto"}
        common.merge_options(body, request.options, _RESERVED)
        return body

    def convert_messages(self, system_prompt: str, messages: Sequence[Message]) -> JsonObject:
        """``{"instructions": system prompt, "input": items}``: the part of the body that
        carries the conversation (``instructions`` left out when there is no prompt)."""
        items: list[JsonObject] = []
        for message in common.sendable(messages):
            match message:
                case SystemMessage():
                    items.append({"role": "system", "content": message.content})
                case UserMessage():
                    items.append({"role": "user", "content": _input_content(message.content)})
                case AssistantMessage():
                    items.extend(_assistant_items(message))
                case ToolMessage():
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": message.tool_call_id,
                            "output": _output(message.content),
                        }
                    )
                case _:
                    assert_never(message)
        result: JsonObject = {"instructions": system_prompt} if system_prompt else {}
        result["input"] = items
        return result

    def convert_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """``strict: false``: strict mode rejects schemas with optional properties."""
        return [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in tools
        ]

    def headers(self, api_key: str | None) -> dict[str, str]:
        return common.headers(api_key)

    def new_parser(
        self, model: str, *, taken: AbstractSet[str] = frozenset()
    ) -> ResponsesStreamParser:
        return ResponsesStreamParser(model, taken=taken)

    def map_stop_reason(self, raw: str | None) -> StopReason:
        """``raw`` is the response status, or for ``incomplete`` the reason it gives."""
        return _STOP.get(raw or "completed", "stop")

    def error_message(self, status: int, body: str) -> tuple[str, str | None]:
        return common.error_message(status, body)


def _image(part: ImagePart) -> JsonObject:
    return {
        "type": "input_image",
        "image_url": part.image_url.url,
        "detail": part.image_url.detail or "auto",
    }


def _input_content(content: Content) -> list[JsonObject]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [
        _image(part) if isinstance(part, ImagePart) else {"type": "input_text", "text": part.text}
        for part in content
    ]


def _output(content: Content) -> str | list[JsonObject]:
    """A tool result: plain text, or input parts when it holds images (plots)."""
    if isinstance(content, str):
        return content
    if any(isinstance(part, ImagePart) for part in content):
        return _input_content(content)
    return "\n".join(part.text for part in content if not isinstance(part, ImagePart))


def _assistant_items(message: AssistantMessage) -> list[JsonObject]:
    """Reasoning first (only what we can send back: encrypted), then text, then calls."""
    items: list[JsonObject] = [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t.text}] if t.text else [],
            "encrypted_content": t.encrypted,
        }
        for t in message.thinking
        if t.encrypted
    ]
    if message.content:
        text = {"type": "output_text", "text": message.content}
        items.append({"type": "message", "role": "assistant", "content": [text]})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": call.function.arguments or "{}",
        }
        for call in message.tool_calls
    )
    return items


def _usage(data: JsonObject) -> Usage:
    """Cached tokens are counted inside ``input_tokens``, reasoning inside ``output_tokens``."""
    prompt = common.count(data, "input_tokens")
    cached = common.count(data.get("input_tokens_details"), "cached_tokens")
    output = common.count(data, "output_tokens")
    return Usage(
        input=max(prompt - cached, 0),
        output=output,
        cache_read=cached,
        reasoning=common.count(data.get("output_tokens_details"), "reasoning_tokens"),
        total=common.count(data, "total_tokens") or prompt + output,
    )


class ResponsesStreamParser:
    """Responses events -> our stream events; ``done`` once ``response.completed`` (or
    ``response.incomplete``) arrived."""

    __slots__ = ("_b", "_calls", "_done", "_raw", "_reasoning", "_streamed_text", "_usage")

    def __init__(self, model: str, *, taken: AbstractSet[str] = frozenset()) -> None:
        self._b = common.MessageBuilder(model, "codex_responses", taken=taken)
        self._reasoning = ReasoningItems(self._b)  # one thinking block per reasoning item
        self._calls: dict[str | int, int] = {}  # item id and output index -> our call index
        self._streamed_text = False  # whether the current message item streamed deltas
        self._raw: str | None = None
        self._usage = Usage()
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self._done:
            return out
        self._b.start(out)
        if event.event == "error" and not event.data.startswith("{"):
            raise common.error_event(event.data)
        data = common.load_object(event.data)
        kind = data.get("type") or event.event
        delta = data.get("delta")
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            if isinstance(delta, str) and delta:
                self._streamed_text = True
                self._b.text(delta, out)
        elif kind == "response.function_call_arguments.delta":
            index = self._call(data.get("item_id"), data.get("output_index"))
            if index is not None and isinstance(delta, str) and delta:
                self._b.call_delta(index, delta, out)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if isinstance(delta, str) and delta:
                key = self._reasoning.key(data.get("item_id"), data.get("output_index"))
                self._reasoning.delta(key, delta, out)
        elif kind == "response.reasoning_summary_part.added":
            key = self._reasoning.key(data.get("item_id"), data.get("output_index"))
            self._reasoning.new_part(key, out)  # parts of one summary read as paragraphs
        elif kind == "response.function_call_arguments.done":
            index = self._call(data.get("item_id"), data.get("output_index"))
            arguments = data.get("arguments")
            if index is not None:
                self._b.end_call(index, out, arguments if isinstance(arguments, str) else None)
        elif kind == "response.output_item.added" or kind == "response.output_item.done":
            item = data.get("item")
            if isinstance(item, dict):
                position = data.get("output_index")
                if kind == "response.output_item.added":
                    self._added(item, position, out)
                else:
                    self._item_done(item, position, out)
        elif kind == "response.completed" or kind == "response.incomplete":
            self._completed(data.get("response"), out)
        elif kind == "response.failed":
            self._take_usage(data.get("response"))  # a failed response was still billed
            raise common.stream_error(data.get("response"), "the response failed")
        elif kind == "error":
            raise common.stream_error({k: v for k, v in data.items() if k != "type"}, event.data)
        return out

    def _call(self, item_id: object, position: object) -> int | None:
        index = self._calls.get(item_id) if isinstance(item_id, str) else None
        if index is None and isinstance(position, int):
            index = self._calls.get(position)
        return index

    def _added(self, item: JsonObject, position: object, out: list[StreamEvent]) -> None:
        kind = item.get("type")
        if kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not (isinstance(call_id, str) and call_id):
                call_id = common.new_call_id()
            index = self._b.start_call(call_id, name if isinstance(name, str) else "", out)
            item_id = item.get("id")
            if isinstance(item_id, str):
                self._calls[item_id] = index
            if isinstance(position, int):
                self._calls[position] = index
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments:
                self._b.call_delta(index, arguments, out)
        elif kind == "reasoning":
            self._reasoning.begin(self._reasoning.key(item.get("id"), position), out)
        elif kind == "message":
            self._streamed_text = False

    def _item_done(self, item: JsonObject, position: object, out: list[StreamEvent]) -> None:
        kind = item.get("type")
        if kind == "reasoning":
            self._reasoning.done(self._reasoning.key(item.get("id"), position), item, out)
        elif kind == "message":
            if not self._streamed_text:
                text = "".join(_part_text(part) for part in item.get("content") or ())
                if text:
                    self._b.text(text, out)
            self._streamed_text = False
            self._b.end_text(out)
        elif kind == "function_call":
            index = self._call(item.get("id"), position)
            if index is None:  # no output_item.added for it
                self._added(item, position, out)
                index = self._call(item.get("id"), position)
            arguments = item.get("arguments")
            if index is not None:
                self._b.end_call(index, out, arguments if isinstance(arguments, str) else None)

    def _completed(self, response: object, out: list[StreamEvent]) -> None:
        self._b.close_all(out)
        self._done = True
        if not isinstance(response, dict):
            return
        self._take_usage(response)
        status = response.get("status")
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        raw = reason if status == "incomplete" and reason else status
        self._raw = raw if isinstance(raw, str) else None

    def _take_usage(self, response: object) -> None:
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            self._usage = _usage(usage)

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise ProviderError("format_error", "the stream ended before response.completed")
        stop = _STOP.get(self._raw or "completed", "stop")
        if stop == "stop" and self._b.calls:
            stop = "tool_use"
        return self._b.message(stop, self._usage, _STOP_MESSAGES.get(self._raw or ""))

    def partial(self) -> AssistantMessage:
        return self._b.message("aborted", self._usage)


def _part_text(part: object) -> str:
    if not isinstance(part, dict):
        return ""
    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
    return text if isinstance(text, str) else ""
