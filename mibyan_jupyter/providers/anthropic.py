"""The Anthropic Messages wire adapter (``anthropic_messages``, ``POST /messages``).

Our history is in OpenAI chat format; Anthropic's differs in ways that make requests fail
rather than degrade, so the conversion is strict about them:

* roles must alternate, so consecutive tool results become *one* user message of
  ``tool_result`` blocks, and a user message right after them joins that message;
* every ``tool_result`` must answer a ``tool_use`` of the assistant message just before, so
  replies we never send (aborted, failed) take their orphaned results with them;
* thinking blocks go back with their signature, unchanged and first; thinking without an
  Anthropic signature (another API's reasoning) cannot be verified by Anthropic and is
  dropped;
* ``max_tokens`` is required, and with extended thinking it must exceed the budget.

Prompt caching follows Hermes' "system_and_3": a ``cache_control`` breakpoint on the system
prompt and on the last block of each of the last three messages (at most four, Anthropic's
limit), so each turn reads the prefix the previous turn wrote.

A reply that stops with ``pause_turn`` (a long server-tool loop, such as web search) is not
the end of the turn: the API asks for a follow-up request that ends with that reply's
content blocks, exactly as sent (server tool blocks included), and the model goes on. The
adapter of one model call keeps the paused reply (:meth:`AnthropicAdapter.continue_paused`)
so the next body carries it and the next parser continues it; the loop sees one reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final, TypeAlias, assert_never

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    Content,
    ImagePart,
    Message,
    StopReason,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.stream import ModelRequest, ThinkingLevel, ToolSpec
from mibyan_jupyter.providers._anthropic_parse import AnthropicParser, json_object, map_stop_reason
from mibyan_jupyter.providers.base import ApiMode
from mibyan_jupyter.providers.notes import add_anthropic_notes

Block: TypeAlias = dict[str, Any]
WireMessage: TypeAlias = dict[str, Any]

ANTHROPIC_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 8192
ANSWER_ROOM: Final = 4096
"""Tokens left for the answer on top of the thinking budget when ``max_tokens`` is raised."""
THINKING_BUDGETS: Final[dict[ThinkingLevel, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32000,
}
CACHED_MESSAGES: Final = 3
MAX_CONTINUATIONS: Final = 8
"""Follow-up requests of one paused turn; after that the paused reply is kept as it is."""
_NOT_WITH_THINKING: Final = ("temperature", "top_k")
_TOOL_ID_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")


class AnthropicAdapter:
    api: ApiMode = "anthropic_messages"
    path: str = "/messages"

    def __init__(self) -> None:
        self._last: AnthropicParser | None = None
        self._paused: AnthropicParser | None = None
        self._continuations = 0

    def continue_paused(self) -> bool:
        """After a reply that stopped with ``pause_turn``: make the next request continue
        it (its body ends with the reply's blocks, its parser starts from the reply).
        False when the last reply was not paused or :data:`MAX_CONTINUATIONS` were made."""
        last = self._last
        if last is None or not last.paused or self._continuations >= MAX_CONTINUATIONS:
            return False
        self._paused, self._continuations = last, self._continuations + 1
        return True

    def forget_paused(self) -> None:
        """The reply starts over (a retry): the next request is the original one."""
        self._paused, self._continuations = None, 0

    def build_body(
        self, request: ModelRequest, model_id: str, *, prompt_caching: bool
    ) -> dict[str, Any]:
        """The streaming request body; ``request.options`` are merged in last, so callers
        can set any field (``top_p``, ``metadata``...) or override ours."""
        system, messages = self.convert_messages(request.system_prompt, request.messages)
        if prompt_caching:
            mark_cache_breakpoints(system, messages)
        # After the breakpoints, so they stay on the transcript and the notes stay outside
        # the cached prefix (docs/architecture.md, "Prompt builder").
        add_anthropic_notes(messages, request.notes)
        if self._paused is not None:  # after the breakpoints: the paused blocks go back as-is
            _append(messages, "assistant", self._paused.content_blocks())
        budget = THINKING_BUDGETS.get(request.thinking_level)
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        if budget is not None:
            max_tokens = max(max_tokens, budget + ANSWER_ROOM)
        body: dict[str, Any] = {"model": model_id, "max_tokens": max_tokens, "stream": True}
        if system:
            body["system"] = system
        body["messages"] = messages
        if request.tools:
            body["tools"] = self.convert_tools(request.tools)
            if request.tool_choice == "none":
                body["tool_choice"] = {"type": "none"}
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body.update(request.options)
        if json_object(body.get("thinking")).get("type", "disabled") != "disabled":
            for key in _NOT_WITH_THINKING:  # Anthropic rejects these with thinking on
                body.pop(key, None)
        return body

    def convert_messages(
        self, system_prompt: str, messages: Sequence[Message]
    ) -> tuple[list[Block], list[WireMessage]]:
        """``(system blocks, messages)``. A system message inside the history has nowhere
        else to go in this API, so it becomes another system block."""
        system = [_text(system_prompt)] if system_prompt else []
        out: list[WireMessage] = []
        awaiting: set[str] = set()  # tool_use ids of the last assistant message, unanswered
        for message in messages:
            if isinstance(message, SystemMessage):
                if message.content:
                    system.append(_text(message.content))
            elif isinstance(message, UserMessage):
                _append(out, "user", _content_blocks(message.content))
            elif isinstance(message, AssistantMessage):
                if not message.sendable:
                    continue
                blocks = _assistant_blocks(message)
                _append(out, "assistant", blocks)
                awaiting = {b["id"] for b in blocks if b["type"] == "tool_use"}
            elif isinstance(message, ToolMessage):
                call_id = _tool_id(message.tool_call_id)
                if call_id in awaiting:
                    awaiting.discard(call_id)
                    _append(out, "user", [_tool_result(call_id, message)])
            else:
                assert_never(message)
        return system, out

    def convert_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        return [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters or {"type": "object", "properties": {}},
            }
            for tool in tools
        ]

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def new_parser(self, model: str) -> AnthropicParser:
        self._last = AnthropicParser(model, resume=self._paused)
        return self._last

    def map_stop_reason(self, raw: str | None) -> StopReason:
        return map_stop_reason(raw)

    def error_message(self, status: int, body: str) -> tuple[str, str | None]:
        """From ``{"type": "error", "error": {"type": ..., "message": ...}}``; a body in
        another shape (a proxy's HTML page) is returned shortened, as the message."""
        try:
            error = json_object(json_object(json.loads(body)).get("error"))
        except ValueError:
            error = {}
        message = error.get("message")
        error_type = error.get("type")
        if not isinstance(message, str) or not message:
            message = body.strip()[:500] or f"HTTP {status}"
        return message, error_type if isinstance(error_type, str) else None


def mark_cache_breakpoints(system: list[Block], messages: list[WireMessage]) -> None:
    """Hermes' "system_and_3" (see the module doc). Thinking blocks cannot carry
    ``cache_control``, so a message's last other block does."""
    if system:
        system[-1]["cache_control"] = {"type": "ephemeral"}
    for message in messages[-CACHED_MESSAGES:]:
        for block in reversed(message["content"]):
            if block["type"] not in ("thinking", "redacted_thinking"):
                block["cache_control"] = {"type": "ephemeral"}
                break


def _append(out: list[WireMessage], role: str, blocks: list[Block]) -> None:
    """Add blocks, joining the previous message when it has the same role (alternation)."""
    if not blocks:
        return  # an empty message is rejected; there is nothing to say anyway
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _content_blocks(content: Content) -> list[Block]:
    """Text and image blocks; empty text is left out (Anthropic rejects empty blocks)."""
    if isinstance(content, str):
        return [_text(content)] if content else []
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append(_text(part.text))
        elif isinstance(part, ImagePart):
            blocks.append(_image(part.image_url.url))
        else:
            assert_never(part)
    return blocks


def _image(url: str) -> Block:
    """An image block from an OpenAI ``image_url``: data URLs become base64 sources, web
    URLs url sources. Anything else becomes a note, so one odd image in the history does
    not make every later request fail."""
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        media_type, *params = header.split(";")
        if "base64" in params and media_type.startswith("image/") and data:
            source = {"type": "base64", "media_type": media_type, "data": data}
            return {"type": "image", "source": source}
        return _text(f"[image not sent: unsupported data URL ({header or 'no type'})]")
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return _text("[image not sent: unsupported URL scheme]")


def _assistant_blocks(message: AssistantMessage) -> list[Block]:
    """Thinking (only when it came from this API: a signature is Anthropic's), text, then
    tool calls with their parsed arguments (invalid JSON is sent as ``{}``; the tool
    result already told the model what went wrong)."""
    blocks: list[Block] = []
    if message.api in (None, "anthropic_messages"):
        for thinking in message.thinking:
            if thinking.redacted and thinking.encrypted:
                blocks.append({"type": "redacted_thinking", "data": thinking.encrypted})
            elif not thinking.redacted and thinking.signature:
                blocks.append(
                    {"type": "thinking", "thinking": thinking.text, "signature": thinking.signature}
                )
    if message.content:
        blocks.append(_text(message.content))
    for call in message.tool_calls:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError:
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": _tool_id(call.id),
                "name": call.function.name,
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return blocks


def _tool_id(call_id: str) -> str:
    """Anthropic accepts ``[a-zA-Z0-9_-]+`` only; ids minted by other APIs may not fit."""
    return _TOOL_ID_CHARS.sub("_", call_id) or "_"


def _tool_result(call_id: str, message: ToolMessage) -> Block:
    content: str | list[Block] = (
        message.content if isinstance(message.content, str) else _content_blocks(message.content)
    )
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content or "",
        "is_error": message.is_error,
    }
