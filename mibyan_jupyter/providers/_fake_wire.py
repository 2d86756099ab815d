"""The fake provider's three wire encoders and error bodies (pure: no sockets, no clock
beyond ``created`` timestamps).

Why separate from the server: the encoders are the part that must match the real wire
formats byte for byte (see ``../shared/fixtures/provider-streams/``), so they are kept free
of HTTP plumbing and can be read side by side, one function per API:

* Chat Completions: ``data:``-only chunks; role delta, reasoning deltas (compatible servers),
  content deltas, ``tool_calls`` deltas by index (id and name first, argument fragments
  after), a ``finish_reason`` chunk, a usage chunk with ``choices: []`` when the request
  asked for ``stream_options.include_usage``, then ``data: [DONE]``.
* Responses: named events with ``sequence_number``; reasoning item (summary events,
  ``encrypted_content`` only when the request ``include``s it, as the real API does), message
  item (``output_text.delta``), function_call items (``function_call_arguments.delta``), then
  ``response.completed`` — or ``response.incomplete`` for a length or content-filter stop.
* Anthropic Messages: ``message_start`` with input usage, a thinking block (``thinking_delta``
  then ``signature_delta``), ``ping``, a text block, ``tool_use`` blocks (``input_json_delta``),
  ``message_delta`` with the stop reason and output usage, ``message_stop``.

Usage mapping (``FakeUsage`` holds normalized numbers, the wire gets what each API reports):
OpenAI prompt/input tokens = ``input + cache_read`` with ``cached_tokens = cache_read``;
output/completion tokens = ``output`` (reasoning included) with ``reasoning_tokens =
reasoning``; ``cache_write`` exists on Anthropic only (``cache_creation_input_tokens``);
Anthropic ``input_tokens = input`` (cache excluded) and has no reasoning count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.providers._fake_script import FakeCall, FakeReply, FakeUsage, Json
from mibyan_jupyter.providers.base import ApiMode


@dataclass(frozen=True)
class Encoded:
    """A reply in one API: the SSE events (each a complete ``bytes`` event) and the
    equivalent non-streaming JSON body."""

    events: list[bytes]
    final: Json


def sse(data: object, event: str | None = None) -> bytes:
    """One SSE event; JSON the way the real servers send it (compact, raw UTF-8)."""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    )
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def pieces(text: str, size: int) -> list[str]:
    """``text`` in deltas of ``size`` characters (none for an empty text)."""
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


def arguments_text(call: FakeCall, *, spaced: bool) -> str:
    if isinstance(call.arguments, str):
        return call.arguments
    if spaced:
        return json.dumps(call.arguments, ensure_ascii=False)
    return json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)


def _signature(reply: FakeReply, n: int) -> str:
    return reply.signature if reply.signature is not None else f"fake-signature-{n}"


# --- Chat Completions ------------------------------------------------------------------------

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


# --- Responses -------------------------------------------------------------------------------


def _responses_usage(u: FakeUsage) -> Json:
    prompt = u.input + u.cache_read
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": prompt + u.output,
    }


def response_object(
    *, model: str, n: int, body: Json, status: str, output: list[Json], **extra: Any
) -> Json:
    """The ``response`` object of Responses events (keys as in the recorded streams)."""
    given = body.get("reasoning")
    reasoning: Json = given if isinstance(given, dict) else {}
    obj: Json = {
        "id": f"resp_fake{n}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }
    return obj | extra


class _ResponsesStream:
    """Numbers events and output items while a reply is laid out."""

    def __init__(self, *, model: str, n: int, body: Json) -> None:
        self.model, self.n, self.body = model, n, body
        self.events: list[bytes] = []
        self.output: list[Json] = []

    def emit(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(self.events)} | fields
        self.events.append(sse(data, kind))

    def response(self, status: str, **extra: Any) -> Json:
        return response_object(
            model=self.model, n=self.n, body=self.body, status=status, output=self.output, **extra
        )

    def item(self, item: Json, fill: Callable[[Json], None]) -> None:
        """``output_item.added`` with ``item`` in progress, the item's own events, then
        ``output_item.done`` with the completed item (which ``fill`` completes)."""
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index, item=item)
        done = dict(item)
        fill(done)
        self.emit("response.output_item.done", output_index=index, item=done)
        self.output.append(done)


def encode_responses(reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    s = _ResponsesStream(model=model, n=n, body=body)
    size = reply.chunk_size
    s.emit("response.created", response=s.response("in_progress"))
    s.emit("response.in_progress", response=s.response("in_progress"))
    include = body.get("include")
    encrypted = isinstance(include, list) and "reasoning.encrypted_content" in include

    if reply.thinking or reply.signature is not None:
        ref: Json = {"item_id": f"rs_fake{n}", "output_index": len(s.output)}
        extra = {"encrypted_content": _signature(reply, n)} if encrypted else {}

        def reasoning(done: Json) -> None:
            if reply.thinking:
                part = {"type": "summary_text", "text": reply.thinking}
                empty = {"type": "summary_text", "text": ""}
                s.emit("response.reasoning_summary_part.added", **ref, summary_index=0, part=empty)
                for p in pieces(reply.thinking, size):
                    s.emit("response.reasoning_summary_text.delta", **ref, summary_index=0, delta=p)
                s.emit(
                    "response.reasoning_summary_text.done",
                    **ref,
                    summary_index=0,
                    text=part["text"],
                )
                s.emit("response.reasoning_summary_part.done", **ref, summary_index=0, part=part)
                done["summary"] = [part]

        s.item({"id": ref["item_id"], "type": "reasoning", **extra, "summary": []}, reasoning)

    if reply.text:
        ref = {"item_id": f"msg_fake{n}", "output_index": len(s.output), "content_index": 0}

        def message(done: Json) -> None:
            part = {"type": "output_text", "text": "", "annotations": []}
            s.emit("response.content_part.added", **ref, part=part)
            for p in pieces(reply.text, size):
                s.emit("response.output_text.delta", **ref, delta=p)
            s.emit("response.output_text.done", **ref, text=reply.text)
            s.emit("response.content_part.done", **ref, part=part | {"text": reply.text})
            done |= {"status": "completed", "content": [part | {"text": reply.text}]}

        msg = {"id": ref["item_id"], "type": "message", "status": "in_progress"}
        s.item(msg | {"role": "assistant", "content": []}, message)

    for i, call in enumerate(reply.calls):
        args = arguments_text(call, spaced=False)
        ref = {"item_id": f"fc_fake{n}_{i}", "output_index": len(s.output)}

        def function_call(done: Json, args: str = args, ref: Json = ref) -> None:
            for p in pieces(args, size):
                s.emit("response.function_call_arguments.delta", **ref, delta=p)
            s.emit("response.function_call_arguments.done", **ref, arguments=args)
            done |= {"status": "completed", "arguments": args}

        fc = {"id": ref["item_id"], "type": "function_call", "status": "in_progress"}
        fc |= {"arguments": "", "call_id": call.id or f"call_{n}_{i}", "name": call.name}
        s.item(fc, function_call)

    usage = _responses_usage(reply.usage) if reply.usage else None
    if reply.stop in ("length", "content_filter"):
        reason = "max_output_tokens" if reply.stop == "length" else "content_filter"
        final = s.response("incomplete", usage=usage, incomplete_details={"reason": reason})
        s.emit("response.incomplete", response=final)
    else:
        final = s.response("completed", usage=usage)
        s.emit("response.completed", response=final)
    return Encoded(s.events, final)


# --- Anthropic Messages ----------------------------------------------------------------------

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def encode_anthropic(reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
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
        signature = _signature(reply, n)
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


ENCODERS: dict[ApiMode, Callable[..., Encoded]] = {
    "chat_completions": encode_chat,
    "codex_responses": encode_responses,
    "anthropic_messages": encode_anthropic,
}


def encode(api: ApiMode, reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    return ENCODERS[api](reply, model=model, n=n, body=body)


# --- Errors ----------------------------------------------------------------------------------

_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: (
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages.",
    ),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    413: ("invalid_request_error", "request_too_large", "Request too large."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for {model}. Please try again."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: (
        "server_error",
        "overloaded",
        "The engine is currently overloaded, please try again later.",
    ),
    529: ("server_error", "overloaded", "The server is overloaded, please try again later."),
}
_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "model: {model}"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    503: ("overloaded_error", "Overloaded"),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(api: ApiMode, status: int, *, message: str | None = None, model: str = "") -> Json:
    """The JSON body a real server sends with HTTP ``status`` (a plausible message per
    status: 400 is a context-length error, 404 a missing model)."""
    if api == "anthropic_messages":
        kind, text = _ANTHROPIC_ERRORS.get(status, ("api_error", f"HTTP {status}"))
        error = {"type": kind, "message": message or text.format(model=model)}
        return {"type": "error", "error": error, "request_id": "req_fake"}
    kind, code, text = _OPENAI_ERRORS.get(status, ("server_error", None, f"HTTP {status}"))
    text = message or text.format(model=model)
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def stream_error_event(
    api: ApiMode, *, message: str | None, model: str, n: int, body: Json, sequence: int
) -> bytes:
    """The error a server sends inside a stream after HTTP 200 (overloaded by default)."""
    if api == "anthropic_messages":
        error = {"type": "overloaded_error", "message": message or "Overloaded"}
        return sse({"type": "error", "error": error}, "error")
    text = message or "The server is overloaded, please try again later."
    if api == "chat_completions":
        fields = {"message": text, "type": "server_error", "param": None, "code": "overloaded"}
        return sse({"error": fields}, "error")
    failed = response_object(
        model=model,
        n=n,
        body=body,
        status="failed",
        output=[],
        error={"code": "server_error", "message": text},
    )
    data = {"type": "response.failed", "sequence_number": sequence, "response": failed}
    return sse(data, "response.failed")
