"""The loopback fake provider speaks the three real wire formats and plays every fault.

Streams are decoded with our own SseDecoder and reassembled by a tiny reference reader
(``summarize``) so the assertions are about what a client would see; the shapes are compared
with the recorded real streams (``support.PROVIDER_STREAMS``, skipped when absent): same
event names in the same order, same keys.
"""

from __future__ import annotations

import email.utils
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from support import body_of, cassette

from mibyan_jupyter.providers.base import ApiMode, SseEvent
from mibyan_jupyter.providers.sse import SseDecoder
from mibyan_jupyter.testing import (
    FakeCall,
    FakeProviderServer,
    FakeReply,
    FakeUsage,
    Fault,
    api_for_path,
    echo_reply,
    fake_model,
    load_script,
    parse_script,
    retry_after_date,
)

APIS: tuple[ApiMode, ...] = ("chat_completions", "codex_responses", "anthropic_messages")
PATH: dict[ApiMode, str] = {
    "chat_completions": "/chat/completions",
    "codex_responses": "/responses",
    "anthropic_messages": "/messages",
}
USER = [{"role": "user", "content": "What is the capital of France?"}]
BODY: dict[ApiMode, dict[str, Any]] = {
    "chat_completions": {
        "model": "gpt-test",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": USER,
    },
    "codex_responses": {
        "model": "gpt-test",
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "input": USER,
    },
    "anthropic_messages": {
        "model": "claude-test",
        "stream": True,
        "max_tokens": 64,
        "messages": USER,
    },
}
TERMINAL = {"response.completed", "response.incomplete", "message_stop"}


@pytest.fixture
def server() -> Any:
    with FakeProviderServer() as fake:
        yield fake


@pytest.fixture
def client(server: FakeProviderServer) -> Any:
    # verify=False: plain HTTP on loopback, and it skips loading CA certificates (~80 ms).
    with httpx.Client(base_url=server.base_url, timeout=5, verify=False) as http:
        yield http


def decode(data: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    return decoder.feed(data) + decoder.close()


def post_stream(client: httpx.Client, api: ApiMode, **body: Any) -> tuple[httpx.Response, bytes]:
    with client.stream("POST", PATH[api], json=BODY[api] | body) as response:
        data = b"".join(response.iter_raw())
    return response, data


def drain(response: httpx.Response, into: bytearray) -> None:
    """Read the raw body into ``into``, keeping what arrived before an error."""
    for chunk in response.iter_raw():
        into += chunk


def summarize(api: ApiMode, events: list[SseEvent]) -> dict[str, Any]:
    """What a client makes of a stream: text, thinking, calls, stop, usage, errors."""
    out: dict[str, Any] = {"text": "", "thinking": "", "stop": None, "usage": None}
    out |= {"done": False, "signature": None, "errors": []}
    calls: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.data == "[DONE]":
            out["done"] = True
            continue
        d = json.loads(event.data)
        kind = d.get("type", event.event)
        if event.event == "error" or kind in ("error", "response.failed"):
            out["errors"].append(d)
        elif api == "chat_completions":
            out["usage"] = d.get("usage") or out["usage"]
            for choice in d["choices"]:
                delta = choice["delta"]
                out["text"] += delta.get("content") or ""
                out["thinking"] += delta.get("reasoning_content") or delta.get("reasoning") or ""
                for tc in delta.get("tool_calls", []):
                    call = calls.setdefault(tc["index"], {"arguments": ""})
                    if "id" in tc:
                        call |= {"id": tc["id"], "name": tc["function"]["name"]}
                    call["arguments"] += tc["function"].get("arguments", "")
                out["stop"] = choice["finish_reason"] or out["stop"]
        elif api == "codex_responses":
            if kind == "response.output_text.delta":
                out["text"] += d["delta"]
            elif kind == "response.reasoning_summary_text.delta":
                out["thinking"] += d["delta"]
            elif kind == "response.output_item.added" and d["item"]["type"] == "function_call":
                item = d["item"]
                calls[d["output_index"]] = {"id": item["call_id"], "name": item["name"]}
                calls[d["output_index"]]["arguments"] = ""
            elif kind == "response.function_call_arguments.delta":
                calls[d["output_index"]]["arguments"] += d["delta"]
            elif kind == "response.output_item.done" and d["item"]["type"] == "reasoning":
                out["signature"] = d["item"].get("encrypted_content")
            elif kind in TERMINAL:
                response = d["response"]
                out |= {"done": True, "usage": response["usage"], "stop": response["status"]}
                if response["incomplete_details"]:
                    out["stop"] += ":" + response["incomplete_details"]["reason"]
        elif kind == "content_block_start" and d["content_block"]["type"] == "tool_use":
            block = d["content_block"]
            calls[d["index"]] = {"id": block["id"], "name": block["name"], "arguments": ""}
        elif kind == "content_block_delta":
            delta = d["delta"]
            if delta["type"] == "text_delta":
                out["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                out["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                out["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                calls[d["index"]]["arguments"] += delta["partial_json"]
        elif kind == "message_delta":
            out |= {"stop": d["delta"]["stop_reason"], "usage": d["usage"]}
        elif kind == "message_stop":
            out["done"] = True
    out["calls"] = [calls[k] for k in sorted(calls)]
    return out


def squeeze(names: list[str]) -> list[str]:
    """Event names with runs of the same name collapsed (delta counts differ)."""
    return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]


def recorded(name: str, index: int = 0) -> list[SseEvent]:
    """The SSE events of a recorded interaction (skips when the fixtures are absent)."""
    return decode(body_of(cassette(name)[index]))


def by_type(events: list[SseEvent]) -> dict[str, dict[str, Any]]:
    """The last JSON payload of each event type."""
    return {
        json.loads(e.data).get("type", e.event): json.loads(e.data)
        for e in events
        if e.data != "[DONE]"
    }


# --- Chat Completions ---------------------------------------------------------------------------


def test_chat_stream_text_thinking_tools_and_usage(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    usage = FakeUsage(input=40, output=30, cache_read=8, reasoning=12)
    calls = [
        FakeCall("get_capital", {"country": "France"}),
        FakeCall("lookup", '{"q": "x"}', id="c9"),
    ]
    server.push(
        FakeReply("Paris is the capital — ünïcode.", thinking="Easy one.", calls=calls, usage=usage)
    )
    response, data = post_stream(client, "chat_completions")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = decode(data)
    assert all(e.event == "message" for e in events)
    assert events[-1].data == "[DONE]"
    chunks = [json.loads(e.data) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"] == []
    summary = summarize("chat_completions", events)
    assert summary["text"] == "Paris is the capital — ünïcode."
    assert summary["thinking"] == "Easy one."
    assert summary["calls"] == [
        {"id": "call_1_0", "name": "get_capital", "arguments": '{"country":"France"}'},
        {"id": "c9", "name": "lookup", "arguments": '{"q": "x"}'},
    ]
    assert summary["stop"] == "tool_calls"
    assert summary["usage"]["prompt_tokens"] == 48
    assert summary["usage"]["completion_tokens"] == 30
    assert summary["usage"]["total_tokens"] == 78
    assert summary["usage"]["prompt_tokens_details"]["cached_tokens"] == 8
    assert summary["usage"]["completion_tokens_details"]["reasoning_tokens"] == 12
    # Each call's first delta carries id and name; the argument fragments come after.
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    heads = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert heads[0]["function"] == {"name": "get_capital", "arguments": ""}
    assert heads[0]["id"] == "call_1_0"
    assert all("id" not in h for h in heads[1:] if h["index"] == 0)


def test_chat_shapes_match_the_recorded_stream(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    real = recorded("openai-chat-stream-tool-call.yaml", 1)
    server.push(FakeReply("The capital of the UK is London."))
    ours = decode(post_stream(client, "chat_completions")[1])

    def kinds(events: list[SseEvent]) -> list[str]:
        out = []
        for e in events:
            if e.data == "[DONE]":
                out.append("done")
                continue
            chunk = json.loads(e.data)
            if not chunk["choices"]:
                out.append("usage")
            elif chunk["choices"][0]["finish_reason"]:
                out.append("finish")
            else:
                out.append("role" if "role" in chunk["choices"][0]["delta"] else "content")
        return squeeze(out)

    assert kinds(ours) == kinds(real) == ["role", "content", "finish", "usage", "done"]
    real_chunks = [json.loads(e.data) for e in real[:-1]]
    for mine in (json.loads(e.data) for e in ours[:-1]):
        assert set(mine) <= set(real_chunks[0]) | {"usage"}
        for choice in mine["choices"]:
            assert set(choice) == set(real_chunks[0]["choices"][0])
    assert set(json.loads(ours[-2].data)["usage"]) == set(real_chunks[-1]["usage"])


def test_chat_tool_call_shapes_match_the_recorded_stream(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    real = recorded("openai-chat-stream-tool-call.yaml", 0)
    server.push(FakeReply(calls=[FakeCall("get_capital", {"country": "UK"})], chunk_size=3))
    ours = decode(post_stream(client, "chat_completions")[1])
    real_head = json.loads(real[0].data)["choices"][0]["delta"]["tool_calls"][0]
    our_head = json.loads(ours[1].data)["choices"][0]["delta"]["tool_calls"][0]
    assert set(our_head) == set(real_head)
    assert set(our_head["function"]) == set(real_head["function"])
    real_args = json.loads(real[1].data)["choices"][0]["delta"]["tool_calls"][0]
    our_args = json.loads(ours[2].data)["choices"][0]["delta"]["tool_calls"][0]
    assert set(our_args) == set(real_args) == {"index", "function"}
    assert summarize("chat_completions", ours)["calls"][0]["arguments"] == '{"country":"UK"}'
    assert summarize("chat_completions", real)["calls"][0]["arguments"] == '{"country":"UK"}'


def test_chat_without_include_usage_sends_no_usage(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    server.push(FakeReply("hi", thinking="hm", reasoning_key="reasoning"))
    events = decode(post_stream(client, "chat_completions", stream_options=None)[1])
    chunks = [json.loads(e.data) for e in events[:-1]]
    assert all("usage" not in c and c["choices"] for c in chunks)
    assert chunks[1]["choices"][0]["delta"] == {"reasoning": "hm"}


def test_chat_non_streaming_json(server: FakeProviderServer, client: httpx.Client) -> None:
    server.push(FakeReply("Hello", calls=[FakeCall("f", {"a": 1})]))
    response = client.post("/chat/completions", json=BODY["chat_completions"] | {"stream": False})
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["content"] == "Hello"
    assert message["tool_calls"] == [
        {"id": "call_1_0", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    ]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"]["prompt_tokens"] == 10


# --- Responses -----------------------------------------------------------------------------------


def test_responses_stream_reasoning_text_tools_and_usage(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    usage = FakeUsage(input=50, output=40, cache_read=5, reasoning=30)
    reply = FakeReply("Paris.", thinking="The user asks.", signature="enc-1", usage=usage)
    server.push(FakeReply(calls=[FakeCall("f", {"x": 1}), FakeCall("g")]), reply)
    first = summarize("codex_responses", decode(post_stream(client, "codex_responses")[1]))
    assert first["calls"] == [
        {"id": "call_1_0", "name": "f", "arguments": '{"x":1}'},
        {"id": "call_1_1", "name": "g", "arguments": "{}"},
    ]
    assert first["stop"] == "completed"
    assert first["done"]
    events = decode(post_stream(client, "codex_responses")[1])
    assert all(e.event == json.loads(e.data)["type"] for e in events)
    assert [json.loads(e.data)["sequence_number"] for e in events] == list(range(len(events)))
    second = summarize("codex_responses", events)
    assert (second["text"], second["thinking"], second["signature"]) == (
        "Paris.",
        "The user asks.",
        "enc-1",
    )
    assert second["usage"] == {
        "input_tokens": 55,
        "input_tokens_details": {"cached_tokens": 5},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 95,
    }
    completed = by_type(events)["response.completed"]["response"]
    assert [item["type"] for item in completed["output"]] == ["reasoning", "message"]
    assert completed["output"][1]["content"][0]["text"] == "Paris."


def test_responses_encrypted_content_only_when_included(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    server.push(FakeReply("ok", thinking="t"))
    events = decode(post_stream(client, "codex_responses", include=[])[1])
    item = by_type(events)["response.output_item.done"]
    reasoning = next(
        json.loads(e.data)["item"]
        for e in events
        if e.event == "response.output_item.done"
        and json.loads(e.data)["item"]["type"] == "reasoning"
    )
    assert "encrypted_content" not in reasoning
    assert item["item"]["type"] == "message"


@pytest.mark.parametrize(
    ("name", "index", "reply"),
    [
        pytest.param(
            "openai-responses-stream-function-call.yaml",
            0,
            FakeReply(calls=[FakeCall("get_capital", {"country": "France"})]),
            id="function-call",
        ),
        pytest.param(
            "openai-responses-stream-function-call.yaml",
            1,
            FakeReply("The capital of France is Paris."),
            id="text",
        ),
        pytest.param(
            "openai-responses-stream-reasoning-usage.yaml",
            0,
            FakeReply(signature="gAAAA-enc", calls=[FakeCall("final_result", {"result": 6666})]),
            id="reasoning",
        ),
    ],
)
def test_responses_shapes_match_the_recorded_streams(
    server: FakeProviderServer, client: httpx.Client, name: str, index: int, reply: FakeReply
) -> None:
    real = recorded(name, index)
    server.push(reply)
    ours = decode(post_stream(client, "codex_responses")[1])
    assert squeeze([e.event for e in ours]) == squeeze([e.event for e in real])
    mine, theirs = by_type(ours), by_type(real)
    ignore = {"sequence_number", "obfuscation"}
    for kind, data in theirs.items():
        assert set(mine[kind]) - ignore == set(data) - ignore, kind
        if "item" in data:
            assert set(mine[kind]["item"]) == set(data["item"]), kind
    newest = by_type(recorded("openai-responses-stream-reasoning-usage.yaml"))
    assert set(mine["response.completed"]["response"]) <= set(
        newest["response.completed"]["response"]
    )
    assert set(mine["response.completed"]["response"]["usage"]) == set(
        newest["response.completed"]["response"]["usage"]
    )
    assert [c["arguments"] for c in summarize("codex_responses", ours)["calls"]] == [
        c["arguments"] for c in summarize("codex_responses", real)["calls"]
    ]


# --- Anthropic Messages ----------------------------------------------------------------------------


def test_anthropic_stream_thinking_text_tools_and_usage(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    usage = FakeUsage(input=100, output=60, cache_read=20, cache_write=30)
    calls = [FakeCall("get_rate", {"from_currency": "USD", "to_currency": "EUR"})]
    server.push(
        FakeReply(
            "Let me check.", thinking="Need a tool.", signature="sig-A", calls=calls, usage=usage
        )
    )
    events = decode(post_stream(client, "anthropic_messages")[1])
    assert all(e.event == json.loads(e.data)["type"] for e in events)
    summary = summarize("anthropic_messages", events)
    assert summary["text"] == "Let me check."
    assert (summary["thinking"], summary["signature"]) == ("Need a tool.", "sig-A")
    assert summary["calls"] == [
        {
            "id": "toolu_1_0",
            "name": "get_rate",
            "arguments": '{"from_currency": "USD", "to_currency": "EUR"}',
        }
    ]
    assert summary["stop"] == "tool_use"
    assert summary["done"]
    assert summary["usage"]["output_tokens"] == 60
    start = by_type(events)["message_start"]["message"]["usage"]
    assert start["input_tokens"] == 100
    assert start["cache_read_input_tokens"] == 20
    assert start["cache_creation_input_tokens"] == 30


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        pytest.param(
            "anthropic-stream-thinking.yaml",
            FakeReply("Here are the steps.", thinking="This is a question."),
            id="thinking",
        ),
        pytest.param(
            "anthropic-stream-tool-use.yaml",
            FakeReply("I found the tool.", calls=[FakeCall("get_exchange_rate", {"a": "b"})]),
            id="tool-use",
        ),
    ],
)
def test_anthropic_shapes_match_the_recorded_streams(
    server: FakeProviderServer, client: httpx.Client, name: str, reply: FakeReply
) -> None:
    real = recorded(name)
    server.push(reply)
    ours = decode(post_stream(client, "anthropic_messages")[1])
    if name == "anthropic-stream-thinking.yaml":
        assert [e.event for e in ours if e.event != "content_block_delta"] == [
            e.event for e in real if e.event != "content_block_delta"
        ]
    ignore = {"stop_details", "inference_geo", "cache_creation", "server_tool_use", "caller"}
    for mine in (json.loads(e.data) for e in ours):
        theirs = next(
            json.loads(e.data)
            for e in real
            if json.loads(e.data)["type"] == mine["type"]
            and json.loads(e.data).get("delta", {}).get("type") == mine.get("delta", {}).get("type")
            and json.loads(e.data).get("content_block", {}).get("type")
            == mine.get("content_block", {}).get("type")
        )
        assert set(mine) == set(theirs)
        for key in ("message", "delta", "content_block", "usage"):
            if isinstance(theirs.get(key), dict):
                assert set(mine[key]) == set(theirs[key]) - ignore, key


def test_anthropic_reply_without_blocks_still_pings(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    server.push(Fault("empty_reply"))
    events = decode(post_stream(client, "anthropic_messages")[1])
    assert [e.event for e in events] == ["message_start", "ping", "message_delta", "message_stop"]


# --- every API -------------------------------------------------------------------------------------

STOPS: dict[ApiMode, dict[str | None, str]] = {
    "chat_completions": {
        None: "stop",
        "stop": "stop",
        "length": "length",
        "content_filter": "content_filter",
    },
    "codex_responses": {
        None: "completed",
        "stop": "completed",
        "length": "incomplete:max_output_tokens",
        "content_filter": "incomplete:content_filter",
    },
    "anthropic_messages": {
        None: "end_turn",
        "stop": "end_turn",
        "length": "max_tokens",
        "content_filter": "refusal",
    },
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stop", [None, "stop", "length", "content_filter"])
def test_stop_reasons(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode, stop: Any
) -> None:
    server.push(FakeReply("text", stop=stop))
    events = decode(post_stream(client, api)[1])
    summary = summarize(api, events)
    assert summary["stop"] == STOPS[api][stop]
    if api == "codex_responses" and stop == "length":
        assert events[-1].event == "response.incomplete"


@pytest.mark.parametrize("api", APIS)
def test_no_usage_reported(server: FakeProviderServer, client: httpx.Client, api: ApiMode) -> None:
    server.push(FakeReply("x", usage=None))
    usage = summarize(api, decode(post_stream(client, api)[1]))["usage"]
    if api == "anthropic_messages":
        assert usage["output_tokens"] == 0
    else:
        assert usage is None


@pytest.mark.parametrize("api", APIS)
def test_fifo_is_shared_across_paths_and_v1_is_optional(
    server: FakeProviderServer, api: ApiMode
) -> None:
    server.push(FakeReply("first"), FakeReply("second"))
    with httpx.Client(base_url=server.url, timeout=5, verify=False) as bare:
        with bare.stream("POST", PATH[api], json=BODY[api]) as response:
            first = summarize(api, decode(response.read()))
        other = APIS[(APIS.index(api) + 1) % 3]
        with bare.stream("POST", "/v1" + PATH[other], json=BODY[other]) as response:
            second = summarize(other, decode(response.read()))
    assert (first["text"], second["text"]) == ("first", "second")
    assert server.pending == 0
    assert [r.api for r in server.requests] == [api, other]


@pytest.mark.parametrize("api", APIS)
def test_non_streaming_bodies(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode
) -> None:
    server.push(FakeReply("plain"))
    body = client.post(PATH[api], json=BODY[api] | {"stream": False}).json()
    text = {
        "chat_completions": lambda b: b["choices"][0]["message"]["content"],
        "codex_responses": lambda b: b["output"][0]["content"][0]["text"],
        "anthropic_messages": lambda b: b["content"][0]["text"],
    }[api](body)
    assert text == "plain"


# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("fault", "status", "needle"),
    [
        (Fault("status", status=429, retry_after=2), 429, "rate"),
        (Fault("status", status=500), 500, ""),
        (Fault("status", status=503, retry_after=0.5), 503, "overloaded"),
        (Fault("status", status=529), 529, "overloaded"),
        (Fault("status", status=401), 401, "key"),
        (Fault("status", status=400), 400, "too long|context length"),
        (Fault("status", status=404), 404, "claude-test|gpt-test"),
    ],
)
def test_status_faults(
    server: FakeProviderServer,
    client: httpx.Client,
    api: ApiMode,
    fault: Fault,
    status: int,
    needle: str,
) -> None:
    server.push(fault)
    response = client.post(PATH[api], json=BODY[api])
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    if api == "anthropic_messages":
        assert body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
        message = body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        message = body["error"]["message"]
    if needle:
        assert any(n in message.lower() for n in needle.split("|")), message
    expected = {429: "2", 503: "0.5"}.get(status)
    assert response.headers.get("retry-after") == expected


def test_anthropic_529_is_the_real_overloaded_body(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    server.push(Fault("status", status=529))
    body = client.post("/messages", json=BODY["anthropic_messages"]).json()
    assert body["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_retry_after_date_and_custom_body_and_headers(
    server: FakeProviderServer, client: httpx.Client
) -> None:
    when = retry_after_date(3)
    assert email.utils.parsedate_to_datetime(when).timestamp() == pytest.approx(
        time.time() + 3, abs=1.5
    )
    server.push(
        Fault(
            "status",
            status=429,
            retry_after=when,
            headers={"retry-after-ms": "10"},
            body={"error": "custom"},
        ),
        Fault("status", status=400, message="Invalid 'temperature'"),
    )
    first = client.post("/chat/completions", json=BODY["chat_completions"])
    assert first.headers["retry-after"] == when
    assert first.headers["retry-after-ms"] == "10"
    assert first.json() == {"error": "custom"}
    second = client.post("/responses", json=BODY["codex_responses"])
    assert second.json()["error"]["message"] == "Invalid 'temperature'"


@pytest.mark.parametrize("api", APIS)
def test_reset_closes_the_connection_without_a_response(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode
) -> None:
    server.push(Fault("reset"), FakeReply("after"))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError)):
        client.post(PATH[api], json=BODY[api])
    assert len(server.requests) == 1  # the request arrived before the reset
    assert summarize(api, decode(post_stream(client, api)[1]))["text"] == "after"


@pytest.mark.parametrize("api", APIS)
def test_error_after_200(server: FakeProviderServer, client: httpx.Client, api: ApiMode) -> None:
    server.push(Fault("error_after_200"))
    response, data = post_stream(client, api)
    assert response.status_code == 200
    events = decode(data)
    assert len(events) == 6
    summary = summarize(api, events)
    assert not summary["done"]
    assert summary["text"] or api == "anthropic_messages"
    [error] = summary["errors"]
    last = events[-1]
    if api == "anthropic_messages":
        assert last.event == "error"
        assert error == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }
    elif api == "chat_completions":
        assert last.event == "error"
        assert "overloaded" in error["error"]["message"]
    else:
        assert last.event == "response.failed"
        assert error["response"]["status"] == "failed"
        assert error["response"]["error"]["code"] == "server_error"
        assert error["sequence_number"] == 5


@pytest.mark.parametrize("api", APIS)
def test_cut_mid_event_is_a_protocol_error(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode
) -> None:
    server.push(Fault("cut_mid_event", after_events=3))
    received = bytearray()
    with client.stream("POST", PATH[api], json=BODY[api]) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            drain(response, received)
    assert len(decode(bytes(received))) == 3
    last_line = bytes(received).rsplit(b"\n", 1)[-1]
    assert last_line.startswith(b"data: {")
    assert not last_line.endswith(b"}")


@pytest.mark.parametrize("api", APIS)
def test_cut_mid_event_with_clean_eof(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode
) -> None:
    server.push(Fault("cut_mid_event", clean_eof=True))
    _, data = post_stream(client, api)
    events = decode(data)
    assert len(events) == 5
    assert not summarize(api, events)["done"]
    assert not data.endswith(b"\n\n")


@pytest.mark.parametrize("api", APIS)
def test_invalid_json_args(server: FakeProviderServer, client: httpx.Client, api: ApiMode) -> None:
    server.push(Fault("invalid_json_args", tool="run_python"))
    summary = summarize(api, decode(post_stream(client, api)[1]))
    [call] = summary["calls"]
    assert call["name"] == "run_python"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call["arguments"])
    assert summary["done"]


@pytest.mark.parametrize("api", APIS)
def test_empty_reply(server: FakeProviderServer, client: httpx.Client, api: ApiMode) -> None:
    server.push(Fault("empty_reply"))
    summary = summarize(api, decode(post_stream(client, api)[1]))
    assert (summary["text"], summary["thinking"], summary["calls"]) == ("", "", [])
    assert summary["done"]
    assert not summary["errors"]


def test_slow_first_byte(server: FakeProviderServer, client: httpx.Client) -> None:
    server.push(Fault("slow_first_byte", seconds=0.3, reply=FakeReply("late")))
    start = time.monotonic()
    with client.stream("POST", "/messages", json=BODY["anthropic_messages"]) as response:
        waited = time.monotonic() - start
        data = response.read()
    assert waited >= 0.3
    assert summarize("anthropic_messages", decode(data))["text"] == "late"


def test_slow_first_byte_trips_a_client_timeout(server: FakeProviderServer) -> None:
    server.push(Fault("slow_first_byte", seconds=2))
    with (
        httpx.Client(base_url=server.base_url, timeout=0.2, verify=False) as impatient,
        pytest.raises(httpx.ReadTimeout),
    ):
        impatient.post("/chat/completions", json=BODY["chat_completions"])


def test_stall_mid_stream(server: FakeProviderServer, client: httpx.Client) -> None:
    server.push(Fault("stall", seconds=0.3, after_events=2))
    gaps: list[float] = []
    decoder = SseDecoder()
    events: list[SseEvent] = []
    with client.stream("POST", "/chat/completions", json=BODY["chat_completions"]) as response:
        last = time.monotonic()
        for chunk in response.iter_raw():
            events += decoder.feed(chunk)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
    assert max(gaps) >= 0.25
    assert summarize("chat_completions", events)["done"]


def test_stall_trips_a_read_timeout_after_the_first_event(server: FakeProviderServer) -> None:
    server.push(Fault("stall", seconds=2))
    received = bytearray()
    with (
        httpx.Client(base_url=server.base_url, timeout=0.3, verify=False) as impatient,
        impatient.stream("POST", "/responses", json=BODY["codex_responses"]) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        drain(response, received)
    assert [e.event for e in decode(bytes(received))] == ["response.created"]


@pytest.mark.parametrize("api", APIS)
def test_empty_script_is_a_loud_500(
    server: FakeProviderServer, client: httpx.Client, api: ApiMode
) -> None:
    response = client.post(PATH[api], json=BODY[api])
    assert response.status_code == 500
    assert "script is empty" in response.text


def test_unknown_path_is_404(server: FakeProviderServer, client: httpx.Client) -> None:
    server.push(FakeReply("unused"))
    assert client.post("/completions", json={}).status_code == 404
    assert client.get("/models").status_code == 404
    assert server.pending == 1


# --- recording, concurrency, lifecycle --------------------------------------------------------------


def test_requests_are_recorded(server: FakeProviderServer, client: httpx.Client) -> None:
    server.push(FakeReply("a"), FakeReply("b"))
    before = time.monotonic()
    client.post(
        "/chat/completions",
        json=BODY["chat_completions"],
        headers={"Authorization": "Bearer sk-test"},
    )
    client.post(
        "/messages?beta=true",
        json=BODY["anthropic_messages"],
        headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"},
    )
    first, second = server.requests
    assert (first.number, first.method, first.path, first.api) == (
        1,
        "POST",
        "/v1/chat/completions",
        "chat_completions",
    )
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.body == BODY["chat_completions"]
    assert first.stream
    assert json.loads(first.raw) == first.body
    assert (second.path, second.query, second.api) == (
        "/v1/messages",
        "beta=true",
        "anthropic_messages",
    )
    assert second.headers["x-api-key"] == "sk-ant-test"
    assert second.headers["anthropic-version"] == "2023-06-01"
    assert before <= first.time <= second.time <= time.monotonic()


def test_a_stalled_stream_does_not_block_other_requests(server: FakeProviderServer) -> None:
    server.push(Fault("stall", seconds=0.8), FakeReply("quick"))
    done = threading.Event()

    def slow() -> None:
        with httpx.Client(base_url=server.base_url, timeout=5, verify=False) as other:
            other.post("/chat/completions", json=BODY["chat_completions"])
        done.set()

    thread = threading.Thread(target=slow)
    thread.start()
    while not server.requests:
        time.sleep(0.01)
    with httpx.Client(base_url=server.base_url, timeout=5, verify=False) as fast:
        start = time.monotonic()
        response = fast.post("/messages", json=BODY["anthropic_messages"])
        assert time.monotonic() - start < 0.5
    assert "quick" in response.text
    assert not done.is_set()
    thread.join()


def test_close_is_prompt_with_open_and_stalled_connections() -> None:
    server = FakeProviderServer(Fault("stall", seconds=30))
    http = httpx.Client(base_url=server.base_url, timeout=5, verify=False)
    errors: list[Exception] = []

    def stalled() -> None:
        try:
            http.post("/chat/completions", json=BODY["chat_completions"])
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=stalled)
    thread.start()
    while not server.requests:
        time.sleep(0.01)
    start = time.monotonic()
    server.close()
    server.close()  # idempotent
    thread.join(timeout=5)
    http.close()
    assert time.monotonic() - start < 2
    assert errors  # the client saw its stream end early


def test_fallback_answers_when_the_script_is_empty() -> None:
    with (
        FakeProviderServer(FakeReply("scripted"), fallback=echo_reply) as server,
        httpx.Client(base_url=server.base_url, timeout=5, verify=False) as http,
    ):
        texts = [
            summarize(api, decode(http.post(PATH[api], json=BODY[api]).content))["text"]
            for api in APIS
        ]
    assert texts[0] == "scripted"
    assert texts[1:] == ["Echo from the fake provider: What is the capital of France?"] * 2


# --- script files and the CLI ------------------------------------------------------------------------

SCRIPT = [
    {
        "text": "Hello",
        "calls": [{"name": "f", "arguments": {"x": 1}, "id": "c1"}],
        "usage": {"input": 3},
    },
    {"kind": "status", "status": 429, "retry_after": 1},
    {"kind": "cut_mid_event", "after_events": 2, "reply": {"text": "partial"}},
]


def test_parse_script() -> None:
    reply, status, cut = parse_script(SCRIPT)
    assert reply == FakeReply(
        "Hello", calls=[FakeCall("f", {"x": 1}, id="c1")], usage=FakeUsage(input=3)
    )
    assert status == Fault("status", status=429, retry_after=1)
    assert cut == Fault("cut_mid_event", after_events=2, reply=FakeReply("partial"))
    with pytest.raises(ValidationError):
        parse_script([{"txt": "typo"}])
    with pytest.raises(ValidationError):
        parse_script([{"kind": "nonsense"}])
    with pytest.raises(ValueError, match="JSON list"):
        parse_script({"text": "not a list"})


def test_api_for_path() -> None:
    assert api_for_path("/v1/chat/completions") == "chat_completions"
    assert api_for_path("/responses/") == "codex_responses"
    assert api_for_path("/v1/messages?beta=true") == "anthropic_messages"
    assert api_for_path("/v1/embeddings") is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mibyan_jupyter.testing", "--quiet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cli_demo_mode_echoes() -> None:
    port = _free_port()
    with _cli("--port", str(port)) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == f"Fake provider listening on http://127.0.0.1:{port}/v1"
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "demo", "messages": [{"role": "user", "content": "ping?"}]},
                timeout=5,
            )
            assert (
                response.json()["choices"][0]["message"]["content"]
                == "Echo from the fake provider: ping?"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=5)


def test_cli_plays_a_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT[:2]))
    assert len(load_script(script)) == 2
    with _cli("--port", "0", "--script", str(script)) as proc:
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().split()[-1]
            with httpx.Client(base_url=base_url, timeout=5) as http:
                first = http.post("/messages", json=BODY["anthropic_messages"])
                second = http.post("/messages", json=BODY["anthropic_messages"])
                third = http.post("/messages", json=BODY["anthropic_messages"])
            assert summarize("anthropic_messages", decode(first.content))["calls"][0]["id"] == "c1"
            assert (second.status_code, second.headers["retry-after"]) == (429, "1")
            assert third.status_code == 500
        finally:
            proc.terminate()
            proc.wait(timeout=5)


def test_the_testing_face() -> None:
    """What users import for their own tests; the providers never import it (the lint bans
    it too: mibyan_jupyter/providers/.ruff.toml)."""
    import ast

    import mibyan_jupyter.testing as testing

    assert sorted(testing.__all__) == [
        "DEFAULT_USAGE",
        "FakeCall",
        "FakeProviderServer",
        "FakeReply",
        "FakeUsage",
        "Fault",
        "FaultKind",
        "NetworkGuard",
        "NetworkRefused",
        "RecordedRequest",
        "ScriptItem",
        "StopKind",
        "api_for_path",
        "echo_reply",
        "fake_model",
        "load_script",
        "parse_script",
        "retry_after_date",
    ]
    providers = Path(testing.__file__).parent.parent / "providers"
    for path in providers.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n.startswith("mibyan_jupyter.testing") for n in names), path


def test_fake_model_points_at_the_server(server: FakeProviderServer) -> None:
    spec = fake_model(server, "m", api_mode="anthropic_messages", key_env="SOME_KEY")
    assert (spec.base_url, spec.api_mode, spec.key_env) == (
        server.base_url,
        "anthropic_messages",
        "SOME_KEY",
    )
