"""What a tool returns, made fit to keep, send and store, in the one place it becomes a message.

Why one place: every tool (kernel tools, ``@tool`` functions, raw :class:`Tool` objects,
later MCP servers and plugins) hands its result to the tool batch, and one bad value in a
transcript broke the whole session: a lone surrogate (a non-UTF-8 file name) made every
later request body, store write and export fail; a ``ToolResult`` whose content was not
text or parts, or whose details held an object JSON cannot encode, failed the message
model or the store writer. So the batch builds every :class:`ToolMessage` through
:func:`tool_message`, and prompts pass through :func:`clean_prompt`
(docs/architecture.md, "Decisions": a transcript is always valid to send).

Text keeps its meaning: surrogate pairs are joined, lone surrogates become U+FFFD
(:mod:`mibyan_jupyter.core.safe_text`); a value that is already clean is returned as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from mibyan_jupyter.core.json_text import as_text, clean_json
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    Content,
    ContentPart,
    ImagePart,
    ImageUrl,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.safe_text import clean_text, is_clean
from mibyan_jupyter.core.tools import ToolResult

__all__ = ["clean_content", "clean_prompt", "clean_prompts", "tool_message"]


def _clean_part(part: object) -> ContentPart:
    if isinstance(part, TextPart):
        return part if is_clean(part.text) else TextPart(text=clean_text(part.text))
    if isinstance(part, ImagePart):
        url = part.image_url.url
        if is_clean(url):
            return part
        return ImagePart(image_url=ImageUrl(url=clean_text(url), detail=part.image_url.detail))
    if isinstance(part, dict):  # a part given as OpenAI-shaped data
        try:
            return _clean_part(_parse_part(part))
        except ValidationError:
            pass
    return TextPart(text=_text_of(part))


def _parse_part(data: dict[Any, Any]) -> ContentPart:
    if data.get("type") == "image_url":
        return ImagePart.model_validate(data)
    return TextPart.model_validate(data)


def _text_of(value: object) -> str:
    """Any value as clean text; a value whose own ``repr`` fails still gives a line."""
    try:
        return clean_text(as_text(value))
    except Exception as error:
        return f"<a {type(value).__name__} that could not be shown: {type(error).__name__}>"


def clean_content(content: object) -> Content:
    """Tool or prompt content as the message models accept it, with valid Unicode: a str,
    or a tuple of text and image parts. Anything else (a number, a dict, ``None``, a list
    of odd items) becomes its JSON text, as ``as_text`` shows return values."""
    if isinstance(content, str):
        return clean_text(content)
    if content is None:
        return ""
    if isinstance(content, tuple | list):
        parts = tuple(_clean_part(part) for part in content)
        if isinstance(content, tuple) and all(a is b for a, b in zip(parts, content, strict=True)):
            return content
        return parts
    return _text_of(content)


def _clean_details(details: object) -> dict[str, object] | None:
    if details is None:
        return None
    cleaned = clean_json(details)
    return cleaned if isinstance(cleaned, dict) else {"value": cleaned}


def tool_message(call_id: str, name: str, result: ToolResult) -> ToolMessage:
    """The result of call ``call_id`` as the message the transcript keeps: content and
    details cleaned; a result no message can hold becomes an error result saying so."""
    try:
        return ToolMessage(
            tool_call_id=call_id,
            name=name,
            content=clean_content(result.content),
            is_error=bool(result.is_error),
            details=_clean_details(result.details),
        )
    except Exception as error:  # a hostile __bool__, a details mapping that fails to read
        return ToolMessage(
            tool_call_id=call_id,
            name=name,
            content=f"Tool {name!r} returned a result that could not be used: {_text_of(error)}",
            is_error=True,
        )


def clean_prompt(message: Message) -> Message:
    """A message given to ``prompt`` / ``steer`` / ``follow_up`` (or as history), with
    its text made valid Unicode; the same object when it already was."""
    if isinstance(message, AssistantMessage):
        if message.content is None or is_clean(message.content):
            return message
        return message.model_copy(update={"content": clean_text(message.content)})
    if isinstance(message, SystemMessage):
        if is_clean(message.content):
            return message
        return message.model_copy(update={"content": clean_text(message.content)})
    if isinstance(message, UserMessage | ToolMessage):
        content = clean_content(message.content)
        if content is message.content:
            return message
        return message.model_copy(update={"content": content})
    return message


def clean_prompts(messages: Sequence[Message]) -> list[Message]:
    return [clean_prompt(message) for message in messages]
