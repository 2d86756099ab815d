"""The Chat Completions wire format (``chat_completions``): OpenAI and every server that
copies it (Ollama, vLLM, llama.cpp, OpenRouter, Groq, DeepSeek...).

Our messages are already in chat format, so conversion mostly drops our extras. What the
compatible servers add is handled on the way in: reasoning arrives as ``reasoning_content``
(DeepSeek, vLLM) or ``reasoning`` (OpenRouter, Ollama, Groq), usage may ride on the
``finish_reason`` chunk instead of a trailing ``choices: []`` chunk, a tool call may arrive
whole in one delta, and some servers reuse index 0 for every call (a new ``id`` tells).

When is a stream complete? After ``data: [DONE]`` (``done`` turns true). A server that never
sends ``[DONE]`` but did send a ``finish_reason`` has also finished: ``finish()`` accepts
that at end of stream. Anything shorter is a cut-off stream: ``format_error``.
"""

from __future__ import annotations

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
    TextPart,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent, ToolSpec

from . import _openai_common as common
from .base import ApiMode, SseEvent
from .errors import ProviderError
from .notes import add_chat_notes

JsonObject = common.JsonObject

_RESERVED = frozenset({"model", "messages", "stream"})
_STOP: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "length",
    "content_filter": "error",
    "error": "error",
}
_STOP_MESSAGES = {
    "content_filter": "The provider's content filter stopped the reply.",
    "error": "The provider ended the reply with an error.",
}


class ChatCompletionsAdapter:
    api: ApiMode = "chat_completions"
    path: str = "/chat/completions"

    def build_body(
        self, request: ModelRequest, model_id: str, *, prompt_caching: bool
    ) -> dict[str, Any]:
        """``prompt_caching`` needs nothing here: OpenAI-style servers cache prefixes alone."""
        messages = self.convert_messages(request.system_prompt, request.messages)
        add_chat_notes(messages, request.notes)  # after the transcript: the prefix stays cached
        body: JsonObject = {
            "model": model_id,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = self.convert_tools(request.tools)
            if request.tool_choice == "none":
                body["tool_choice"] = "none"
        if request.max_tokens:
            body["max_completion_tokens"] = request.max_tokens
        if request.thinking_level != "off":
            body["reasoning_effort"] = common.EFFORT[request.thinking_level]
        common.merge_options(body, request.options, _RESERVED)
        return body

    def convert_messages(self, system_prompt: str, messages: Sequence[Message]) -> list[JsonObject]:
        """Chat messages. Thinking is not sent back (OpenAI ignores it; the servers that want
        ``reasoning_content`` back manage without it). Images returned by tools go in a user
        message after the run of tool results: a tool message may only hold text."""
        out: list[JsonObject] = (
            [{"role": "system", "content": system_prompt}] if system_prompt else []
        )
        images: list[JsonObject] = []
        for message in common.sendable(messages):
            if images and not isinstance(message, ToolMessage):
                out.append(_image_message(images))
                images = []
            match message:
                case SystemMessage():
                    out.append({"role": "system", "content": message.content})
                case UserMessage():
                    out.append({"role": "user", "content": _user_content(message.content)})
                case AssistantMessage():
                    out.append(_assistant(message))
                case ToolMessage():
                    text, found = _tool_content(message.content)
                    images.extend(found)
                    out.append(
                        {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
                    )
                case _:
                    assert_never(message)
        if images:
            out.append(_image_message(images))
        return out

    def convert_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in tools
        ]

    def headers(self, api_key: str | None) -> dict[str, str]:
        return common.headers(api_key)

    def new_parser(self, model: str, *, taken: AbstractSet[str] = frozenset()) -> ChatStreamParser:
        return ChatStreamParser(model, taken=taken)

    def map_stop_reason(self, raw: str | None) -> StopReason:
        """Unknown or missing reasons (``eos`` and friends from small servers) mean stop."""
        return _STOP.get(raw or "stop", "stop")

    def error_message(self, status: int, body: str) -> tuple[str, str | None]:
        return common.error_message(status, body)


def _user_content(content: Content) -> str | list[JsonObject]:
    if isinstance(content, str):
        return content
    return [part.model_dump(exclude_none=True) for part in content]


def _assistant(message: AssistantMessage) -> JsonObject:
    calls = [
        {
            "id": call.id,
            "type": "function",
            # Servers that parse the arguments (vLLM, Ollama) choke on an empty string.
            "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
        }
        for call in message.tool_calls
    ]
    if calls:
        return {"role": "assistant", "content": message.content, "tool_calls": calls}
    # A reply with neither text nor calls (reasoning only) stays in place, as empty text,
    # for the servers whose chat templates insist on user/assistant alternation.
    return {"role": "assistant", "content": message.content or ""}


def _tool_content(content: Content) -> tuple[str, list[JsonObject]]:
    if isinstance(content, str):
        return content, []
    text = "\n".join(part.text for part in content if isinstance(part, TextPart))
    images = [part.model_dump(exclude_none=True) for part in content if isinstance(part, ImagePart)]
    return (text or "(see the attached image)") if images else text, images


def _image_message(images: list[JsonObject]) -> JsonObject:
    text = {"type": "text", "text": "Image(s) returned by the tool call(s) above:"}
    return {"role": "user", "content": [text, *images]}


def _usage(data: JsonObject) -> Usage:
    """OpenAI counts cached tokens inside ``prompt_tokens`` and reasoning tokens inside
    ``completion_tokens``; our ``input`` is the uncached part. DeepSeek reports its cache
    hits as ``prompt_cache_hit_tokens``."""
    prompt = common.count(data, "prompt_tokens")
    details = data.get("prompt_tokens_details")
    cached = common.count(details, "cached_tokens") or common.count(data, "prompt_cache_hit_tokens")
    written = common.count(details, "cache_write_tokens")
    output = common.count(data, "completion_tokens")
    return Usage(
        input=max(prompt - cached - written, 0),
        output=output,
        cache_read=cached,
        cache_write=written,
        reasoning=common.count(data.get("completion_tokens_details"), "reasoning_tokens"),
        total=common.count(data, "total_tokens") or prompt + output,
    )


class ChatStreamParser:
    """Chat Completions chunks -> our stream events (see the module docstring for ``done``)."""

    __slots__ = ("_b", "_done", "_finish", "_open", "_usage", "_wire")

    def __init__(self, model: str, *, taken: AbstractSet[str] = frozenset()) -> None:
        self._b = common.MessageBuilder(model, "chat_completions", taken=taken)
        self._wire: dict[int, int] = {}  # the server's tool-call index -> ours
        self._open: int | None = None  # our index of the call receiving fragments
        self._finish: str | None = None
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
        if event.event == "error":
            raise common.error_event(event.data)
        if event.data.startswith("[DONE]"):
            self._b.close_all(out)
            self._done = True
            return out
        chunk = common.load_object(event.data)
        if chunk.get("error"):
            raise common.stream_error(chunk, event.data)
        usage = chunk.get("usage")
        if isinstance(usage, dict) and usage:
            self._usage = _usage(usage)
        choices = chunk.get("choices")
        if choices and isinstance(choices[0], dict) and choices[0].get("index", 0) == 0:
            self._choice(choices[0], out)  # with n > 1, the other choices are not ours to show
        return out

    def _choice(self, choice: JsonObject, out: list[StreamEvent]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict) and len(delta) == 1 and "content" in delta:
            content = delta["content"]  # the common chunk: one piece of text, nothing else
            if content and isinstance(content, str):
                self._b.text(content, out)
        elif isinstance(delta, dict):
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                self._b.thinking(reasoning, out)
            content = delta.get("content")
            if content and isinstance(content, str):
                self._b.text(content, out)
            for call in delta.get("tool_calls") or ():
                if isinstance(call, dict):
                    self._tool_call(call, out)
        finish = choice.get("finish_reason")
        if finish:
            self._finish = str(finish)
            self._b.close_all(out)

    def _tool_call(self, call: JsonObject, out: list[StreamEvent]) -> None:
        wire = call.get("index")
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
        # Without an index, fragments continue the open call unless an id says otherwise.
        target = (
            self._wire.get(wire) if isinstance(wire, int) else (None if call_id else self._open)
        )
        if target is not None and call_id and call_id != self._b.call_id(target):
            target = None  # the server reused an index for a new call
        if target is None:
            if self._open is not None:
                self._b.end_call(self._open, out)
            new_id = call_id if isinstance(call_id, str) and call_id else common.new_call_id()
            target = self._b.start_call(new_id, name if isinstance(name, str) else "", out)
            if isinstance(wire, int):
                self._wire[wire] = target
            self._open = target
        elif isinstance(name, str) and name:
            self._b.name_call(target, name)
        if isinstance(arguments, str) and arguments:
            self._b.call_delta(target, arguments, out)

    def _stop(self) -> tuple[StopReason, str | None]:
        stop = _STOP.get(self._finish or "stop", "stop")
        if stop == "stop" and self._b.calls:
            stop = "tool_use"  # some servers say "stop" after tool calls
        return stop, _STOP_MESSAGES.get(self._finish or "")

    def finish(self) -> AssistantMessage:
        if not (self._done or self._finish):
            raise ProviderError("format_error", "the stream ended before finish_reason or [DONE]")
        stop, error = self._stop()
        return self._b.message(stop, self._usage, error)

    def partial(self) -> AssistantMessage:
        return self._b.message("aborted", self._usage)
