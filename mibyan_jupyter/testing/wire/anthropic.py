"""The fake provider's Anthropic Messages encoder.

The stream: ``message_start`` with input usage, a thinking block (``thinking_delta`` then
``signature_delta``), ``ping``, a text block, ``tool_use`` blocks (``input_json_delta``),
``message_delta`` with the stop reason and output usage, ``message_stop``.
"""

from __future__ import annotations

import json

from mibyan_jupyter.testing.scripts import FakeReply, FakeUsage, Json
from mibyan_jupyter.testing.wire.common import (
    Encoded,
    arguments_text,
    pieces,
    signature_of,
    sse,
)

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def encode_anthropic(reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    """``reply`` as a Messages stream and as the equivalent ``message`` object."""
    u = reply.usage or FakeUsage()
    usage: Json = {
        "input_tokens": u.input,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
    }
    message: Json = {"id": f"msg_fake{n}", "type": "message", "role": "assistant"}
    message |= {"model": model, "content": [], "stop_reason": None, "stop_sequence": None}
    start = message | {"usage": usage | {"output_tokens": 1, "service_tier": "standard"}}
    events = [sse({"type": "message_start", "message": start}, "message_start")]
    blocks: list[Json] = []
    size = reply.chunk_size

    def block(first: Json, deltas: list[Json], done: Json) -> None:
        index = len(blocks)
        data = {"type": "content_block_start", "index": index, "content_block": first}
        events.append(sse(data, "content_block_start"))
        if index == 0:
            events.append(sse({"type": "ping"}, "ping"))
        for delta in deltas:
            data = {"type": "content_block_delta", "index": index, "delta": delta}
            events.append(sse(data, "content_block_delta"))
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        blocks.append(done)

    if reply.thinking or reply.signature is not None:
        signature = signature_of(reply, n)
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(reply.thinking, size)]
        deltas.append({"type": "signature_delta", "signature": signature})
        first = {"type": "thinking", "thinking": "", "signature": ""}
        block(first, deltas, first | {"thinking": reply.thinking, "signature": signature})
    if reply.text:
        deltas = [{"type": "text_delta", "text": p} for p in pieces(reply.text, size)]
        block({"type": "text", "text": ""}, deltas, {"type": "text", "text": reply.text})
    for i, call in enumerate(reply.calls):
        args = arguments_text(call, spaced=True)
        chunks = ["", *pieces(args, size)]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in chunks]
        first = {"type": "tool_use", "id": call.id or f"toolu_{n}_{i}", "name": call.name}
        try:
            parsed: object = json.loads(args)
        except ValueError:
            parsed = {}
        block(first | {"input": {}}, deltas, first | {"input": parsed})
    if not blocks:
        events.append(sse({"type": "ping"}, "ping"))

    stop = _ANTHROPIC_STOP[reply.stop] if reply.stop else "tool_use" if reply.calls else "end_turn"
    delta = {"stop_reason": stop, "stop_sequence": None}
    end_usage = usage | {"output_tokens": u.output}
    data = {"type": "message_delta", "delta": delta, "usage": end_usage}
    events.append(sse(data, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    final = message | {"content": blocks, "stop_reason": stop, "usage": end_usage}
    return Encoded(events, final)
