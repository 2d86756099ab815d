"""The content blocks of an Anthropic stream as the parser (:mod:`._anthropic_parse`)
keeps them: each block as the API sent it, deltas applied, so a reply that stopped with
``pause_turn`` can be sent back exactly as it came, and the tool call or thinking each
block becomes in our messages, and our stop reason for Anthropic's. Kept apart from the parser's state machine so each stays
short.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic_core import from_json

from mibyan_jupyter.core.messages import FunctionCall, StopReason, Thinking, ToolCall
from mibyan_jupyter.core.safe_text import clean_text

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "error",
}


def map_stop_reason(raw: str | None) -> StopReason:
    """Our stop reason for Anthropic's; an unknown or missing one is a normal stop (new
    reasons appear over time and should not fail a finished reply)."""
    return _STOP_REASONS.get(raw or "", "stop")


def loads(data: str) -> object:
    """``from_json`` is the fast path; ``json.loads`` takes what it refuses but JSON allows
    (a lone surrogate escape, as a split emoji arrives: the loop cleans it)."""
    try:
        return from_json(data)
    except ValueError:
        return json.loads(data)


def json_object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class StreamBlock:
    kind: Literal["text", "thinking", "redacted", "tool", "ignored"]
    raw: dict[str, Any]
    """The block as the API sent it, deltas applied (what a continuation sends back)."""
    parts: list[str] = field(default_factory=list)
    secret: str | None = None
    """The signature of a thinking block, the data of a redacted one."""
    call: int = -1
    call_id: str = ""
    name: str = ""


def tool_call(block: StreamBlock) -> ToolCall:
    """The call with its arguments text as streamed, made valid Unicode (core/safe_text.py);
    no fragments at all means ``{}``."""
    arguments = clean_text("".join(block.parts))
    if not arguments.strip():
        arguments = "{}"
    return ToolCall(id=block.call_id, function=FunctionCall(name=block.name, arguments=arguments))


def apply_raw(block: StreamBlock, delta: dict[str, Any]) -> None:
    """Apply a delta to the block as the API would have sent it whole. JSON input (of a
    tool call or a server tool call) is gathered as text and parsed when the block ends."""
    raw, dtype = block.raw, delta.get("type")
    for name, key in (("text_delta", "text"), ("thinking_delta", "thinking")):
        if dtype == name:
            raw[key] = (raw.get(key) or "") + str(delta.get(key) or "")
    if dtype == "signature_delta":
        raw["signature"] = (raw.get("signature") or "") + str(delta.get("signature") or "")
    elif dtype == "input_json_delta":
        raw["_json"] = (raw.get("_json") or "") + str(delta.get("partial_json") or "")
    elif dtype == "citations_delta" and isinstance(delta.get("citation"), dict):
        raw["citations"] = [*(raw.get("citations") or ()), delta["citation"]]


def close_raw(block: StreamBlock) -> None:
    text = block.raw.pop("_json", None)
    if text is None:
        return
    try:
        block.raw["input"] = json_object(json.loads(text)) if text.strip() else {}
    except ValueError:
        block.raw["input"] = {}


def thinking_of(block: StreamBlock) -> Thinking:
    if block.kind == "redacted":
        return Thinking(redacted=True, encrypted=block.secret)
    return Thinking(text="".join(block.parts), signature=block.secret)
