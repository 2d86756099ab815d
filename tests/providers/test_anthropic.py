"""The Anthropic Messages adapter: history conversion (every message kind, alternation,
prompt-caching breakpoints, thinking budgets), and the stream parser replaying real
recorded streams (``support.PROVIDER_STREAMS``, skipped when absent) split into
awkward chunks, plus inline streams for the faults the recordings lack."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import body_of, cassette, splits

from mibyan_jupyter.core._run.model_call import PartialMessage
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    ImagePart,
    ImageUrl,
    Message,
    SystemMessage,
    TextPart,
    Thinking,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent, ThinkingLevel, ToolSpec
from mibyan_jupyter.providers.anthropic import THINKING_BUDGETS, AnthropicAdapter
from mibyan_jupyter.providers.errors import ProviderError, classify_status
from mibyan_jupyter.providers.sse import SseDecoder

ADAPTER = AnthropicAdapter()
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


# --- helpers ------------------------------------------------------------------------------------


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def convert(*messages: Message, system: str = "") -> list[dict[str, Any]]:
    _, wire = ADAPTER.convert_messages(system, messages)
    return wire


def request(messages: list[Message], **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="anthropic:claude", system_prompt="Be brief.", messages=messages, **kwargs
    )


def cache_marks(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where cache_control sits: ("system", 0, block) or ("message", i, block)."""
    marks = [("system", 0, i) for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        for i, block in enumerate(message["content"]):
            if "cache_control" in block:
                assert block["cache_control"] == {"type": "ephemeral"}
                marks.append(("message", m, i))
    return marks


def replay(chunks: list[bytes]) -> tuple[list[StreamEvent], AssistantMessage]:
    decoder = SseDecoder()
    parser = ADAPTER.new_parser("claude-requested")
    events: list[StreamEvent] = []
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            events.extend(parser.feed(sse))
    for sse in decoder.close():
        events.extend(parser.feed(sse))
    assert parser.done
    return events, parser.finish()


def same(a: AssistantMessage, b: AssistantMessage) -> bool:
    return a.model_dump(exclude={"timestamp"}) == b.model_dump(exclude={"timestamp"})


def sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(
        f"event: {p['type']}\ndata: {json.dumps(p, ensure_ascii=False)}\n\n" for p in payloads
    ).encode()


MESSAGE_START = {
    "type": "message_start",
    "message": {"model": "claude-x", "usage": {"input_tokens": 10, "output_tokens": 1}},
}


def text_block(index: int, *texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text"}},
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": t},
            }
            for t in texts
        ),
        {"type": "content_block_stop", "index": index},
    ]


def ending(stop: str = "end_turn", output: int = 5) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    ]


# --- message conversion -------------------------------------------------------------------------


def test_user_text_and_both_image_kinds() -> None:
    parts = (
        TextPart(text="What is in these?"),
        ImagePart(image_url=ImageUrl(url=f"data:image/png;base64,{PNG}")),
        ImagePart(image_url=ImageUrl(url="https://example.com/cat.jpg", detail="high")),
        TextPart(text=""),
    )
    assert convert(UserMessage(content="hi"), UserMessage(content=parts)) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "text", "text": "What is in these?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            ],
        }
    ]


@pytest.mark.parametrize(
    "url", ["data:image/svg+xml;utf8,<svg/>", "data:text/plain;base64,aGk=", "ftp://x/y.png"]
)
def test_unsendable_image_becomes_a_note(url: str) -> None:
    [message] = convert(UserMessage(content=(ImagePart(image_url=ImageUrl(url=url)),)))
    [block] = message["content"]
    assert block["type"] == "text"
    assert block["text"].startswith("[image not sent")


def test_assistant_blocks_in_order_thinking_text_tool_use() -> None:
    assistant = AssistantMessage(
        content="Let me look.",
        thinking=(
            Thinking(text="Think.", signature="sig-1"),
            Thinking(redacted=True, encrypted="opaque"),
        ),
        tool_calls=(
            call("toolu_1", "read", '{"path": "a.py"}'),
            call("toolu_2", "ls", "{not json"),
        ),
        stop_reason="tool_use",
        api="anthropic_messages",
    )
    [message] = convert(assistant)
    assert message == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Think.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}},
        ],
    }


def test_thinking_anthropic_cannot_verify_is_dropped() -> None:
    unsigned = AssistantMessage(content="a", thinking=(Thinking(text="no signature"),))
    foreign = AssistantMessage(
        content="b", thinking=(Thinking(text="t", signature="s"),), api="codex_responses"
    )
    wire = convert(unsigned, UserMessage(content="next"), foreign)
    assert wire[0]["content"] == [{"type": "text", "text": "a"}]
    assert wire[2]["content"] == [{"type": "text", "text": "b"}]


def test_tool_results_become_one_user_message_and_the_next_user_message_joins_it() -> None:
    assistant = AssistantMessage(
        tool_calls=(call("call_1", "read", "{}"), call("call|2", "ls", "")), stop_reason="tool_use"
    )
    plot = ImagePart(image_url=ImageUrl(url=f"data:image/jpeg;base64,{PNG}"))
    wire = convert(
        UserMessage(content="go"),
        assistant,
        ToolMessage(tool_call_id="call_1", content="file text"),
        ToolMessage(tool_call_id="call|2", content=(TextPart(text="a plot"), plot), is_error=True),
        UserMessage(content="thanks, now summarize"),
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"][1] == {"type": "tool_use", "id": "call_2", "name": "ls", "input": {}}
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "file text", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "call_2",
            "content": [
                {"type": "text", "text": "a plot"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                },
            ],
            "is_error": True,
        },
        {"type": "text", "text": "thanks, now summarize"},
    ]


def test_aborted_and_failed_replies_are_skipped_with_their_orphaned_results() -> None:
    aborted = AssistantMessage(
        content="partial", tool_calls=(call("c9", "read", '{"pa'),), stop_reason="aborted"
    )
    failed = AssistantMessage(stop_reason="error", error_message="overloaded")
    wire = convert(
        UserMessage(content="one"),
        aborted,
        ToolMessage(tool_call_id="c9", content="never ran", is_error=True),
        UserMessage(content="two"),
        failed,
        UserMessage(content="three"),
    )
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
                {"type": "text", "text": "three"},
            ],
        }
    ]


def test_system_messages_and_empty_content() -> None:
    system, wire = ADAPTER.convert_messages(
        "You help.",
        [
            SystemMessage(content="Note: cwd is /tmp"),
            UserMessage(content=""),
            UserMessage(content="x"),
        ],
    )
    assert system == [
        {"type": "text", "text": "You help."},
        {"type": "text", "text": "Note: cwd is /tmp"},
    ]
    assert wire == [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert ADAPTER.convert_messages("", [])[0] == []


def test_convert_tools() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    tools = [ToolSpec("read", "Read a file.", schema), ToolSpec("now", "The time.", {})]
    assert ADAPTER.convert_tools(tools) == [
        {"name": "read", "description": "Read a file.", "input_schema": schema},
        {
            "name": "now",
            "description": "The time.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


# --- request body -------------------------------------------------------------------------------


def conversation() -> list[Message]:
    return [
        UserMessage(content="list files"),
        AssistantMessage(
            thinking=(Thinking(text="use ls", signature="s1"),),
            tool_calls=(call("t1", "ls", "{}"),),
            stop_reason="tool_use",
        ),
        ToolMessage(tool_call_id="t1", content="a.py b.py"),
        AssistantMessage(content="Two files.", thinking=(Thinking(text="done", signature="s2"),)),
        UserMessage(content="and now?"),
    ]


def test_body_basics_and_no_caching_by_default() -> None:
    tools = [ToolSpec("ls", "List.", {"type": "object", "properties": {}})]
    body = ADAPTER.build_body(
        request(conversation(), tools=tools), "claude-sonnet-4-5", prompt_caching=False
    )
    assert body["model"] == "claude-sonnet-4-5"
    assert body["stream"] is True
    assert body["max_tokens"] == 8192
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert body["tools"][0]["name"] == "ls"
    assert "tool_choice" not in body
    assert "thinking" not in body
    assert cache_marks(body) == []
    json.dumps(body)


def test_cache_breakpoints_system_and_last_three_messages() -> None:
    body = ADAPTER.build_body(request(conversation()), "claude", prompt_caching=True)
    # messages: user, assistant(thinking, tool_use), user(tool_result), assistant(thinking, text), user
    assert cache_marks(body) == [
        ("system", 0, 0),
        ("message", 2, 0),
        ("message", 3, 1),
        ("message", 4, 0),
    ]
    short = ADAPTER.build_body(request([UserMessage(content="hi")]), "claude", prompt_caching=True)
    assert cache_marks(short) == [("system", 0, 0), ("message", 0, 0)]


def test_cache_breakpoint_never_on_thinking_and_never_more_than_four() -> None:
    thinking_only = AssistantMessage(thinking=(Thinking(text="hmm", signature="s"),))
    history: list[Message] = [
        UserMessage(content=f"q{i}") if i % 2 == 0 else thinking_only for i in range(9)
    ]
    body = ADAPTER.build_body(request(history), "claude", prompt_caching=True)
    marks = cache_marks(body)
    assert len(marks) <= 4
    assert marks == [("system", 0, 0), ("message", 6, 0), ("message", 8, 0)]


@pytest.mark.parametrize("level", list(THINKING_BUDGETS))
@pytest.mark.parametrize("max_tokens", [None, 1000, 50_000])
def test_thinking_budget_and_max_tokens(level: ThinkingLevel, max_tokens: int | None) -> None:
    req = request(
        [UserMessage(content="hi")],
        thinking_level=level,
        max_tokens=max_tokens,
        options={"temperature": 0.3, "top_k": 5, "top_p": 0.95},
    )
    body = AnthropicAdapter().build_body(req, "claude", prompt_caching=False)
    wanted = THINKING_BUDGETS[level]
    if max_tokens is None:  # raised to leave room for the answer
        assert body["thinking"] == {"type": "enabled", "budget_tokens": wanted}
        assert body["max_tokens"] == max(8192, wanted + 4096)
    else:  # a named max_tokens is a ceiling: the budget is cut to fit (or dropped)
        assert body["max_tokens"] == max_tokens
        if max_tokens < 2048:
            assert "thinking" not in body
        else:
            budget = body["thinking"]["budget_tokens"]
            assert 1024 <= budget <= min(wanted, max_tokens - min(4096, max_tokens // 2))
    assert body["top_p"] == 0.95
    if "thinking" in body:
        assert "temperature" not in body
        assert "top_k" not in body


def test_options_merge_tool_choice_none_and_max_tokens() -> None:
    tools = [ToolSpec("ls", "List.", {"type": "object"})]
    req = request(
        [UserMessage(content="hi")],
        tools=tools,
        tool_choice="none",
        max_tokens=300,
        options={"temperature": 0.2, "metadata": {"user_id": "u1"}},
    )
    body = ADAPTER.build_body(req, "claude", prompt_caching=False)
    assert body["tool_choice"] == {"type": "none"}
    assert body["max_tokens"] == 300
    assert body["temperature"] == 0.2
    assert body["metadata"] == {"user_id": "u1"}
    no_tools = ADAPTER.build_body(
        request([UserMessage(content="hi")], tool_choice="none"), "c", prompt_caching=False
    )
    assert "tools" not in no_tools
    assert "tool_choice" not in no_tools


def test_headers() -> None:
    assert ADAPTER.headers("sk-ant-secret") == {
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "x-api-key": "sk-ant-secret",
    }
    assert "x-api-key" not in ADAPTER.headers(None)
    assert (ADAPTER.api, ADAPTER.path) == ("anthropic_messages", "/messages")


@pytest.mark.parametrize(
    ("raw", "ours"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("tool_use", "tool_use"),
        ("max_tokens", "length"),
        ("refusal", "error"),
        (None, "stop"),
    ],
)
def test_map_stop_reason(raw: str | None, ours: str) -> None:
    assert ADAPTER.map_stop_reason(raw) == ours


# --- HTTP error bodies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "message", "code", "kind"),
    [
        (
            529,
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}',
            "Overloaded",
            "overloaded_error",
            "overloaded",
        ),
        (
            500,
            '{"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
            "Internal server error",
            "api_error",
            "server_error",
        ),
        (
            400,
            '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}',
            "prompt is too long: 208310 tokens > 200000 maximum",
            "invalid_request_error",
            "context_overflow",
        ),
        (
            401,
            '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
            "invalid x-api-key",
            "authentication_error",
            "auth",
        ),
        (502, "<html>Bad Gateway</html>", "<html>Bad Gateway</html>", None, "server_error"),
        (503, "", "HTTP 503", None, "overloaded"),
    ],
)
def test_error_message(status: int, body: str, message: str, code: str | None, kind: str) -> None:
    assert ADAPTER.error_message(status, body) == (message, code)
    assert classify_status(status, message, code) == kind


# --- recorded streams ---------------------------------------------------------------------------


def test_recorded_thinking_stream_at_every_split() -> None:
    [interaction] = cassette("anthropic-stream-thinking.yaml")
    body = body_of(interaction)
    events, message = replay([body])
    anchors = [b"event: message_start", b"signature_delta", b"event: ping", b"event: message_stop"]
    for chunks in splits(body, anchors, margin=60):
        again, final = replay(chunks)
        assert again == events
        assert same(final, message)

    types = [e.type for e in events]
    assert types[:3] == ["start", "thinking_start", "thinking_delta"]
    assert types.count("thinking_delta") == 13
    assert types.count("text_delta") == 95
    assert types[-1] == "text_end"
    assert events[0].model_dump() == {
        "type": "start",
        "model": "claude-sonnet-4-20250514",
        "api": "anthropic_messages",
    }
    [thinking] = message.thinking
    assert thinking.text == (
        "This is a straightforward question about pedestrian safety. I should provide clear, "
        "helpful advice about how to safely cross a street. This is basic safety information "
        "that could help prevent accidents."
    )
    assert thinking.signature is not None
    assert thinking.signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK/0")
    assert thinking.signature.endswith("DvP/UhjfQYAQ==")
    assert len(thinking.signature) == 504
    end = next(e for e in events if e.type == "thinking_end")
    assert end.model_dump() == {
        "type": "thinking_end",
        "signature": thinking.signature,
        "encrypted": None,
        "redacted": False,
    }
    assert message.content is not None
    assert message.content.startswith(
        "Here are the basic steps for safely crossing the street:\n\n**At"
    )
    assert message.content.endswith("Always prioritize safety over speed when crossing streets.")
    assert len(message.content) == 1021
    assert message.tool_calls == ()
    assert message.stop_reason == "stop"
    assert message.usage == Usage(input=43, output=282, total=325)
    assert (message.model, message.api) == ("claude-sonnet-4-20250514", "anthropic_messages")

    # The thinking goes back exactly as it came, first.
    [wire] = convert(message)
    assert wire["content"][0] == {
        "type": "thinking",
        "thinking": thinking.text,
        "signature": thinking.signature,
    }
    assert wire["content"][1] == {"type": "text", "text": message.content}


def test_recorded_tool_use_stream_at_every_split() -> None:
    first, second = cassette("anthropic-stream-tool-use.yaml")
    body = body_of(first)
    events, message = replay([body])
    anchors = [
        b'"type":"server_tool_use"',
        b'"type":"tool_use"',
        b"input_json_delta",
        b"message_delta",
    ]
    for chunks in splits(body, anchors, margin=60):
        again, final = replay(chunks)
        assert again == events
        assert same(final, message)

    recorded = second["request"]["parsed_body"]["messages"]
    said = [b["text"] for b in recorded[1]["content"] if b["type"] == "text"]
    assert message.content == "\n\n".join(said)
    # The server tool's search is not our tool call: one call, index 0.
    starts = [e for e in events if e.type == "toolcall_start"]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "toolu_01EFn5wTNBYA8Reni8rbmnHT", "get_exchange_rate")
    ]
    [tool_call] = message.tool_calls
    assert tool_call.id == "toolu_01EFn5wTNBYA8Reni8rbmnHT"
    assert json.loads(tool_call.function.arguments) == {
        "from_currency": "USD",
        "to_currency": "EUR",
    }
    deltas = "".join(e.delta for e in events if e.type == "toolcall_delta")
    assert deltas == tool_call.function.arguments
    assert message.stop_reason == "tool_use"
    # message_delta's cumulative counts replace message_start's 702.
    assert message.usage == Usage(input=1591, output=175, total=1766)

    # Our next request says what the recorded one said (bar the server tool blocks).
    result = ToolMessage(tool_call_id=tool_call.id, content=(TextPart(text="1 USD = 0.92 EUR"),))
    user = UserMessage(content=recorded[0]["content"][0]["text"])
    wire = convert(user, message, result)
    assert wire[0] == recorded[0]
    assert wire[1]["content"][-1] == recorded[1]["content"][-1]
    assert wire[2] == recorded[2]

    _, answer = replay([body_of(second)])
    assert answer.content is not None
    assert answer.content.startswith("The current exchange rate is **1 USD = 0.92 EUR**.")
    assert answer.stop_reason == "stop"
    assert answer.usage == Usage(input=1007, output=59, total=1066)


# --- inline streams -----------------------------------------------------------------------------


def test_events_rebuild_the_final_message() -> None:
    """The core's PartialMessage, fed our events, agrees with finish() (text separators too)."""
    body = sse(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "redacted_thinking", "data": "xyz"},
        },
        {"type": "content_block_stop", "index": 0},
        *text_block(1, "Café ☕ "),
        *text_block(2, "cited."),
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}},
        },
        {"type": "content_block_stop", "index": 3},
        *text_block(4, "After 🚶."),
        *ending("tool_use"),
    )
    events, message = replay([body])
    for chunks in splits(body, [b"\xe2\x98\x95", b"\xf0\x9f\x9a\xb6"]):
        assert replay(chunks)[0] == events
    assert message.content == "Café ☕ cited.\n\nAfter 🚶."
    assert message.thinking == (Thinking(redacted=True, encrypted="xyz"),)
    assert message.tool_calls == (call("toolu_a", "now", "{}"),)
    assert message.usage == Usage(input=10, output=5, total=15)
    partial = PartialMessage("claude")
    for event in events:
        partial.apply(event)
    snapshot = partial.snapshot("tool_use")
    assert (snapshot.content, snapshot.tool_calls, snapshot.thinking) == (
        message.content,
        message.tool_calls,
        message.thinking,
    )
    assert convert(message)[0]["content"][0] == {"type": "redacted_thinking", "data": "xyz"}


def test_cache_usage_and_refusal() -> None:
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-x",
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 4000,
            },
        },
    }
    _, message = replay([sse(start, *text_block(0, "No."), *ending("refusal", output=3))])
    assert message.usage == Usage(input=12, output=3, cache_read=4000, cache_write=300, total=4315)
    assert message.stop_reason == "error"
    assert message.error_message is not None


@pytest.mark.parametrize(
    ("error_type", "text", "kind"),
    [
        ("overloaded_error", "Overloaded", "overloaded"),
        ("rate_limit_error", "Too many requests", "rate_limit"),
        ("api_error", "Internal server error", "server_error"),
        (
            "invalid_request_error",
            "prompt is too long: 201000 tokens > 200000 maximum",
            "context_overflow",
        ),
        ("invalid_request_error", "messages: roles must alternate", "bad_request"),
        ("invalid_request_error", "Your credit balance is too low", "billing"),
        ("authentication_error", "invalid x-api-key", "auth"),
        ("permission_error", "not allowed", "auth"),
        ("not_found_error", "model: claude-nope", "model_not_found"),
        ("request_too_large", "Request exceeds the maximum size", "payload_too_large"),
        ("mystery_error", "something", "server_error"),
    ],
)
def test_error_event_after_200(error_type: str, text: str, kind: str) -> None:
    error = {"type": "error", "error": {"type": error_type, "message": text}}
    body = sse(MESSAGE_START, {"type": "ping"}, *text_block(0, "Hel")) + sse(error)
    decoder = SseDecoder()
    parser = ADAPTER.new_parser("claude")
    *before, last = decoder.feed(body)
    for sse_event in before:
        parser.feed(sse_event)
    with pytest.raises(ProviderError) as caught:
        parser.feed(last)
    assert (caught.value.kind, caught.value.message, caught.value.code) == (kind, text, error_type)
    assert not parser.done
    assert parser.partial().content == "Hel"


def test_overloaded_error_event_is_retryable() -> None:
    body = b'event: message_start\ndata: {"type":"message_start","message":{"model":"m","usage":{}}}\n\n'
    body += b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    parser = ADAPTER.new_parser("claude")
    events = SseDecoder().feed(body)
    parser.feed(events[0])
    with pytest.raises(ProviderError) as caught:
        parser.feed(events[1])
    assert caught.value.kind == "overloaded"
    assert caught.value.hints.retryable
    assert caught.value.hints.fall_back


def test_stream_cut_off_mid_event() -> None:
    body = sse(MESSAGE_START, *text_block(0, "Hello", ", wor")[:3])
    body += b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"del'
    decoder = SseDecoder()
    parser = ADAPTER.new_parser("claude")
    events: list[StreamEvent] = []
    for chunk in (body[:50], body[50:]):
        for sse_event in decoder.feed(chunk):
            events.extend(parser.feed(sse_event))
    for sse_event in decoder.close():
        events.extend(parser.feed(sse_event))
    assert not parser.done
    with pytest.raises(ProviderError) as caught:
        parser.finish()
    assert caught.value.kind == "format_error"
    partial = parser.partial()
    assert partial.content == "Hello, wor"
    assert partial.stop_reason == "aborted"
    assert partial.usage.input == 10
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta"]


def test_partial_keeps_an_unfinished_tool_call() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "ls", "input": {}},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
    }
    parser = ADAPTER.new_parser("claude")
    for sse_event in SseDecoder().feed(sse(MESSAGE_START, start, delta)):
        parser.feed(sse_event)
    assert parser.partial().tool_calls == (call("t", "ls", '{"pa'),)


@pytest.mark.parametrize(
    "data",
    [
        b"{oops",
        b'{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":null}}',
        b'{"type":"content_block_start","index":[0],"content_block":{"type":"text"}}',
    ],
)
def test_malformed_event_is_a_format_error(data: bytes) -> None:
    parser = ADAPTER.new_parser("claude")
    [event] = SseDecoder().feed(b"event: content_block_start\ndata: " + data + b"\n\n")
    with pytest.raises(ProviderError) as caught:
        parser.feed(event)
    assert caught.value.kind == "format_error"
