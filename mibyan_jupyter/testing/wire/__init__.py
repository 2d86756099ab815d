"""The fake provider's wire encoders: a scripted reply in each of the three wire APIs, and the
error bodies real servers send (pure: no sockets, no clock beyond ``created`` timestamps).

Why apart from the server: the encoders are the part that must match the real wire formats
byte for byte (the recorded streams the tests compare against), so they are kept free of
HTTP plumbing and can be read side by side, one module per API: :mod:`.chat` (Chat
Completions), :mod:`.responses` (Responses), :mod:`.anthropic` (Anthropic Messages), with
:mod:`.errors` for error bodies, :mod:`.common` for SSE framing, and :mod:`.raw` for a
response scripted as its exact events (:class:`RawReply`).

Usage mapping (``FakeUsage`` holds normalized numbers, the wire gets what each API reports):
OpenAI prompt/input tokens = ``input + cache_read`` with ``cached_tokens = cache_read``;
output/completion tokens = ``output`` (reasoning included) with ``reasoning_tokens =
reasoning``; ``cache_write`` exists on Anthropic only (``cache_creation_input_tokens``);
Anthropic ``input_tokens = input`` (cache excluded) and has no reasoning count.
"""

from __future__ import annotations

from collections.abc import Callable

from mibyan_jupyter.providers.base import ApiMode
from mibyan_jupyter.testing.scripts import FakeReply, Json
from mibyan_jupyter.testing.wire.anthropic import encode_anthropic
from mibyan_jupyter.testing.wire.chat import encode_chat
from mibyan_jupyter.testing.wire.common import Encoded, sse
from mibyan_jupyter.testing.wire.errors import error_body, stream_error_event
from mibyan_jupyter.testing.wire.raw import RawReply
from mibyan_jupyter.testing.wire.responses import encode_responses, response_object

__all__ = [
    "ENCODERS",
    "Encoded",
    "RawReply",
    "encode",
    "encode_anthropic",
    "encode_chat",
    "encode_responses",
    "error_body",
    "response_object",
    "sse",
    "stream_error_event",
]

ENCODERS: dict[ApiMode, Callable[..., Encoded]] = {
    "chat_completions": encode_chat,
    "codex_responses": encode_responses,
    "anthropic_messages": encode_anthropic,
}


def encode(api: ApiMode, reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    """``reply`` in the wire API a request came in on (``n``: the request's number)."""
    return ENCODERS[api](reply, model=model, n=n, body=body)
