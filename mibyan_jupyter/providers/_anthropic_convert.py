"""Our OpenAI-format history in Anthropic's Messages shape (see :mod:`.anthropic`, whose
module docstring says why each rule is strict): roles alternate, every ``tool_result``
answers a ``tool_use`` of the assistant message just before, thinking goes back with its
signature, images become base64 or URL sources, and Hermes' "system_and_3" cache
breakpoints. Kept apart from the adapter (which builds the body and holds a paused turn)
so each stays short.
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
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)

Block: TypeAlias = dict[str, Any]
WireMessage: TypeAlias = dict[str, Any]

CACHED_MESSAGES: Final = 3
_TOOL_ID_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")


def convert_messages(
    system_prompt: str, messages: Sequence[Message]
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
            append_blocks(out, "user", _content_blocks(message.content))
        elif isinstance(message, AssistantMessage):
            if not message.sendable:
                continue
            blocks = _assistant_blocks(message)
            append_blocks(out, "assistant", blocks)
            awaiting = {b["id"] for b in blocks if b["type"] == "tool_use"}
        elif isinstance(message, ToolMessage):
            call_id = _tool_id(message.tool_call_id)
            if call_id in awaiting:
                awaiting.discard(call_id)
                append_blocks(out, "user", [_tool_result(call_id, message)])
        else:
            assert_never(message)
    return system, out


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


def append_blocks(out: list[WireMessage], role: str, blocks: list[Block]) -> None:
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
