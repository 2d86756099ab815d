"""Decoding and normalizing large model streams: MB/s and events/s per wire API.

For each API a ~20 MB stream of small text deltas (the shape real providers send) is fed
in 64 KiB chunks through our SSE decoder and the adapter's parser, into our stream events
(full normalization: text deltas, the final message with usage). Chat Completions is also
measured end to end through ``ProviderClient`` over an ``httpx.MockTransport``, and, when
the openai SDK is installed in the bench environment, through the SDK's own parsing
(``client.chat.completions.create(stream=True)`` over the same transport and bytes).

Goal (issue 3): ratio_vs_openai_sdk >= 10. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone
from mibyan_jupyter.providers.client import ProviderClient, adapter_for
from mibyan_jupyter.providers.sse import SseDecoder

WORDS = [
    "the ",
    "model ",
    "streams ",
    "small ",
    "deltas, ",
    "one ",
    "token ",
    "at ",
    "a ",
    "time. ",
]


def chat_stream(target: int) -> bytes:
    head = '{"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","system_fingerprint":"fp_1","choices":[{"index":0,"delta":'
    parts = [
        f'data: {head}{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}\n\n'
    ]
    size, i = 0, 0
    while size < target:
        line = f'data: {head}{{"content":{json.dumps(WORDS[i % 10])}}},"logprobs":null,"finish_reason":null}}]}}\n\n'
        parts.append(line)
        size += len(line)
        i += 1
    parts.append(f'data: {head}{{}},"logprobs":null,"finish_reason":"stop"}}]}}\n\n')
    usage = {"prompt_tokens": 10, "completion_tokens": i, "total_tokens": i + 10}
    tail = {
        "id": "chatcmpl-b",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [],
        "usage": usage,
    }
    parts.append(f"data: {json.dumps(tail, separators=(',', ':'))}\n\n")
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def responses_stream(target: int) -> bytes:
    def event(kind: str, payload: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload}, separators=(',', ':'))}\n\n"

    resp = {
        "id": "resp_b",
        "object": "response",
        "model": "gpt-4.1",
        "status": "in_progress",
        "output": [],
    }
    parts = [
        event("response.created", {"response": resp, "sequence_number": 0}),
        event(
            "response.output_item.added",
            {
                "output_index": 0,
                "item": {
                    "id": "msg_b",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
                "sequence_number": 1,
            },
        ),
        event(
            "response.content_part.added",
            {
                "item_id": "msg_b",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
                "sequence_number": 2,
            },
        ),
    ]
    size, i, text = 0, 0, []
    while size < target:
        line = event(
            "response.output_text.delta",
            {
                "item_id": "msg_b",
                "output_index": 0,
                "content_index": 0,
                "delta": WORDS[i % 10],
                "sequence_number": i + 3,
            },
        )
        parts.append(line)
        text.append(WORDS[i % 10])
        size += len(line)
        i += 1
    full = "".join(text)
    item = {
        "id": "msg_b",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": full, "annotations": []}],
    }
    parts.append(
        event(
            "response.output_text.done",
            {
                "item_id": "msg_b",
                "output_index": 0,
                "content_index": 0,
                "text": full,
                "sequence_number": i + 3,
            },
        )
    )
    parts.append(
        event(
            "response.output_item.done", {"output_index": 0, "item": item, "sequence_number": i + 4}
        )
    )
    done = {
        **resp,
        "status": "completed",
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": i,
            "total_tokens": i + 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    parts.append(event("response.completed", {"response": done, "sequence_number": i + 5}))
    return "".join(parts).encode()


def anthropic_stream(target: int) -> bytes:
    def event(kind: str, payload: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload}, separators=(',', ':'))}\n\n"

    parts = [
        event(
            "message_start",
            {
                "message": {
                    "id": "msg_b",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 10,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                }
            },
        ),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    size, i = 0, 0
    while size < target:
        line = event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": WORDS[i % 10]}},
        )
        parts.append(line)
        size += len(line)
        i += 1
        if i % 5000 == 0:
            parts.append(event("ping", {}))
    parts.append(event("content_block_stop", {"index": 0}))
    parts.append(
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": i},
            },
        )
    )
    parts.append(event("message_stop", {}))
    return "".join(parts).encode()


def chunked(body: bytes, size: int = 65536) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def normalize(mode: str, body: bytes) -> tuple[float, int]:
    """Seconds to decode + normalize ``body``, and the number of events produced."""
    chunks = chunked(body)
    start = time.perf_counter()
    parser = adapter_for(mode).new_parser("bench")  # type: ignore[arg-type]
    decoder = SseDecoder()
    count = 0
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            count += len(parser.feed(sse))
    for sse in decoder.close():
        count += len(parser.feed(sse))
    final = parser.finish()
    elapsed = time.perf_counter() - start
    assert final.content
    assert len(final.content) > 1000
    return elapsed, count


def transport_for(body: bytes) -> httpx.MockTransport:
    """Serves ``body`` in 64 KiB chunks, as a socket would deliver it."""

    class Chunked(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            for chunk in chunked(body):
                yield chunk

    def chunked_handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunked())

    return httpx.MockTransport(chunked_handler)


async def through_client(body: bytes) -> float:
    client = ProviderClient(transport=transport_for(body))
    request = ModelRequest(
        model="bench@http://bench.invalid/v1",
        system_prompt="",
        messages=[UserMessage(content="go")],
    )
    start = time.perf_counter()
    final = None
    async for event in client(request, AbortSignal()):
        if isinstance(event, StreamDone):
            final = event.message
    elapsed = time.perf_counter() - start
    assert final is not None
    assert final.content
    await client.aclose()
    return elapsed


async def through_openai_sdk(body: bytes) -> float | None:
    try:
        from openai import AsyncOpenAI
    except ImportError:
        return None
    http = httpx.AsyncClient(transport=transport_for(body))
    client = AsyncOpenAI(
        api_key="bench", base_url="http://bench.invalid/v1", http_client=http, max_retries=0
    )
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "go"}], stream=True
    )
    text = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    elapsed = time.perf_counter() - start
    assert text
    await http.aclose()
    return elapsed


def best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    target = int(args.mb * 1_000_000)
    figures: dict[str, float | None] = {}
    print(f"{'API':<20} {'MB':>6} {'MB/s':>8} {'events/s':>12}")
    for key, mode, make in (
        ("chat_completions", "chat_completions", chat_stream),
        ("responses", "codex_responses", responses_stream),
        ("anthropic", "anthropic_messages", anthropic_stream),
    ):
        body = make(target)
        runs = [normalize(mode, body) for _ in range(args.repeat)]
        seconds = min(r[0] for r in runs)
        events = runs[0][1]
        mb = len(body) / 1e6
        figures[f"{key}_mb_s"] = round(mb / seconds, 2)
        figures[f"{key}_events_s"] = round(events / seconds)
        print(f"{key:<20} {mb:>6.1f} {mb / seconds:>8.2f} {events / seconds:>12.0f}")
    body = chat_stream(target)
    mb = len(body) / 1e6
    client_s = min(asyncio.run(through_client(body)) for _ in range(args.repeat))
    figures["chat_completions_client_mb_s"] = round(mb / client_s, 2)
    print(f"{'chat via client+httpx':<20} {mb:>6.1f} {mb / client_s:>8.2f}")
    sdk = [asyncio.run(through_openai_sdk(body)) for _ in range(args.repeat)]
    sdk_s = min((s for s in sdk if s is not None), default=None)
    figures["openai_sdk_mb_s"] = round(mb / sdk_s, 2) if sdk_s else None
    figures["ratio_vs_openai_sdk"] = round(sdk_s / client_s, 2) if sdk_s else None
    if sdk_s:
        print(f"{'openai SDK':<20} {mb:>6.1f} {mb / sdk_s:>8.2f}")
        print(
            f"ratio vs openai SDK (end to end, same bytes and transport): {sdk_s / client_s:.1f}x (goal >= 10)"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
