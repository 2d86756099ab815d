"""The fake provider's OpenAI Chat Completions encoder.

The stream, as the real API and compatible servers send it: ``data:``-only chunks; a role
delta, reasoning deltas (compatible servers), content deltas, ``tool_calls`` deltas by index
(id and name first, argument fragments after), a ``finish_reason`` chunk, a usage chunk with
``choices: []`` when the request asked for ``stream_options.include_usage``, then
``data: [DONE]``.
"""

from __future__ import annotations

import time

from mibyan_jupyter.testing.scripts import FakeReply, FakeUsage, Json
from mibyan_jupyter.testing.wire.common import Encoded, arguments_text, pieces, sse

_CHAT_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter"}


def _chat_usage(u: FakeUsage) -> Json:
    prompt = u.input + u.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.output,
        "total_tokens": prompt + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning, "audio_tokens": 0},
    }


def encode_chat(reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    """``reply`` as a Chat Completions stream and as the equivalent ``chat.completion``."""
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    base: Json = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk"}
    base |= {"created": int(time.time()), "model": model, "system_fingerprint": "fp_fake"}

    def chunk(delta: Json, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**base, "choices": [choice]} | ({"usage": None} if include_usage else {}))

    size = reply.chunk_size
    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events += [chunk({reply.reasoning_key: p}) for p in pieces(reply.thinking, size)]
    events += [chunk({"content": p}) for p in pieces(reply.text, size)]
    calls: list[Json] = []
    for i, call in enumerate(reply.calls):
        args = arguments_text(call, spaced=False)
        function = {"name": call.name, "arguments": args}
        calls.append({"id": call.id or f"call_{n}_{i}", "type": "function", "function": function})
        head = {"index": i, "id": calls[-1]["id"], "type": "function"}
        events.append(chunk({"tool_calls": [head | {"function": function | {"arguments": ""}}]}))
        events += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in pieces(args, size)
        ]
    finish = _CHAT_FINISH[reply.stop] if reply.stop else "tool_calls" if calls else "stop"
    events.append(chunk({}, finish))
    usage = _chat_usage(reply.usage) if reply.usage else None
    if include_usage and usage:
        events.append(sse({**base, "choices": [], "usage": usage}))
    events.append(sse("[DONE]"))

    message: Json = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.thinking:
        message[reply.reasoning_key] = reply.thinking
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    final = base | {"object": "chat.completion", "choices": [choice], "usage": usage}
    return Encoded(events, final)
