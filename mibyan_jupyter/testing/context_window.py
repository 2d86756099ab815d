"""The fake provider's own context window: it counts a request's tokens its own way and
refuses an oversize one with the error a real provider sends.

Why its own way: tests and the long-session bench check that the agent never sends a
request past the window. If the server counted with the agent's estimator
(``mibyan_jupyter.core.tokens``), a wrong estimate would grade itself and pass. So this
counter reads the request body as it arrives over HTTP, in the wire format, and counts
UTF-8 bytes of everything the model would read (system, messages, tool calls, tool schemas)
at 3 bytes a token: a stricter count than the agent's for ASCII text, so an agent whose
compression works under this server also fits a real tokenizer's count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.providers.base import ApiMode

BYTES_PER_TOKEN = 3
"""Fewer bytes per token than real tokenizers average on English and code (~4): strict."""


def _walk_text(value: Any) -> int:
    """UTF-8 bytes of every string in ``value`` (keys of objects left out but "arguments",
    "content", "text", "input", "instructions" and all other values read)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, dict):
        return sum(_walk_text(v) for k, v in value.items() if k not in ("model", "stream"))
    if isinstance(value, list):
        return sum(_walk_text(v) for v in value)
    return 0


def request_tokens(body: dict[str, Any]) -> int:
    """The tokens this server says the request's prompt holds."""
    parts = [body.get(key) for key in ("system", "messages", "input", "instructions", "tools")]
    return sum(_walk_text(p) for p in parts if p is not None) // BYTES_PER_TOKEN


@dataclass(frozen=True, slots=True)
class Overflow:
    """A refused request: what the server counted and the error it answers with."""

    tokens: int
    window: int
    status: int
    body: dict[str, Any]


def check_window(api: ApiMode, raw: bytes, window: int | None) -> Overflow | None:
    """``None`` when the request fits ``window`` (or there is no window); else the HTTP
    400 a real provider of ``api`` sends for a prompt that is too long."""
    if window is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    tokens = request_tokens(body)
    if tokens <= window:
        return None
    return Overflow(tokens, window, 400, overflow_body(api, tokens, window))


def overflow_body(api: ApiMode, tokens: int, window: int) -> dict[str, Any]:
    """The body of a too-long prompt, as each API words it."""
    if api == "anthropic_messages":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {window} maximum",
            },
            "request_id": "req_fake_window",
        }
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages" if api == "chat_completions" else "input",
            "code": "context_length_exceeded",
        }
    }
