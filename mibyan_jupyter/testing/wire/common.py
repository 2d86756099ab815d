"""What the three wire encoders share: the encoded form of a reply, SSE framing, deltas.

Why a module of its own: each encoder (``chat``, ``responses``, ``anthropic``) is read side by
side with the real wire format it imitates, so the framing they all need lives apart from them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mibyan_jupyter.testing.scripts import FakeCall, FakeReply, Json


@dataclass(frozen=True)
class Encoded:
    """A reply in one API: the SSE events (each a complete ``bytes`` event) and the
    equivalent non-streaming JSON body."""

    events: list[bytes]
    final: Json


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def sse(data: object, event: str | None = None) -> bytes:
    """One SSE event; JSON the way the real servers send it (compact, raw UTF-8).

    A surrogate code point (half of a pair a script split across two deltas, or a lone one)
    has no UTF-8 form, so it goes out as the ``\\udXXX`` escape a real server sends then;
    it can only stand inside a JSON string, where that escape means the same."""
    text = (
        data
        if isinstance(data, str)
        else _SURROGATE.sub(
            _escape_surrogate, json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        )
    )
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def pieces(text: str, size: int) -> list[str]:
    """``text`` in deltas of ``size`` characters (none for an empty text)."""
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


def arguments_text(call: FakeCall, *, spaced: bool) -> str:
    """A call's arguments as streamed: a string verbatim, a dict compact or (Anthropic) spaced."""
    if isinstance(call.arguments, str):
        return call.arguments
    if spaced:
        return json.dumps(call.arguments, ensure_ascii=False)
    return json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)


def signature_of(reply: FakeReply, n: int) -> str:
    """The thinking signature (Anthropic) or ``encrypted_content`` (Responses) of a reply:
    the scripted one, else ``fake-signature-{n}``."""
    return reply.signature if reply.signature is not None else f"fake-signature-{n}"
