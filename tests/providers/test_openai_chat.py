"""The Chat Completions adapter: history conversion (every message kind, unpaired calls and
results, images from tools), the request body, error bodies, the stop-reason table, and the
stream parser replaying real recorded streams (``support.PROVIDER_STREAMS``, skipped
when absent) split into awkward chunks, plus inline streams for what compatible servers do
that the recordings lack. Also the partial-JSON helper used to display streaming arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import body_of, cassette, splits

from mibyan_jupyter.core._run.model_call import PartialMessage
from mibyan_jupyter.core._run.partial_json import parse_partial
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
from mibyan_jupyter.core.stream import (
    ModelRequest,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingLevel,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
)
from mibyan_jupyter.providers.errors import ProviderError, classify_status
from mibyan_jupyter.providers.openai_chat import ChatCompletionsAdapter
from mibyan_jupyter.providers.sse import SseDecoder

ADAPTER = ChatCompletionsAdapter()
IMAGE = ImagePart(image_url=ImageUrl(url="data:image/png;base64,iVBORw0KGgo=", detail="low"))
WEATHER = ToolSpec("weather", "Weather for a city.", {"type": "object", "properties": {}})


# --- helpers ------------------------------------------------------------------------------------


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def request(messages: list[Message] | None = None, **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="openai:gpt", system_prompt="Be brief.", messages=messages or [], **kwargs
    )


def feed_all(chunks: list[bytes], parser: Any) -> list[StreamEvent]:
    decoder = SseDecoder()
    events: list[StreamEvent] = []
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            events.extend(parser.feed(sse))
    for sse in decoder.close():
        events.extend(parser.feed(sse))
    return events


def replay(chunks: list[bytes]) -> tuple[list[StreamEvent], AssistantMessage]:
    parser = ADAPTER.new_parser("gpt-requested")
    events = feed_all(chunks, parser)
    return events, parser.finish()


def data(*chunks: dict[str, Any] | str) -> bytes:
    lines = (c if isinstance(c, str) else json.dumps(c) for c in chunks)
    return "".join(f"data: {line}\n\n" for line in lines).encode()


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def tool_delta(**fields: Any) -> dict[str, Any]:
    return delta(tool_calls=[fields])


def consistent(events: list[StreamEvent], final: AssistantMessage) -> None:
    """The core's PartialMessage, fed our events, agrees with finish()."""
    partial = PartialMessage("x")
    for event in events:
        partial.apply(event)
    snap = partial.snapshot()
    assert snap.content == final.content
    assert snap.tool_calls == final.tool_calls
    assert [t.text for t in snap.thinking] == [t.text for t in final.thinking]
    assert isinstance(events[0], StreamStart)
    assert sum(isinstance(e, StreamStart) for e in events) == 1


# --- message conversion -------------------------------------------------------------------------


def test_system_prompt_user_text_parts_and_images() -> None:
    parts = (TextPart(text="what is this?"), IMAGE)
    wire = ADAPTER.convert_messages(
        "Be brief.",
        [
            UserMessage(content="hi"),
            SystemMessage(content="Now in French."),
            UserMessage(content=parts),
        ],
    )
    assert wire == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Now in French."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
                },
            ],
        },
    ]
    assert ADAPTER.convert_messages("", [UserMessage(content="hi")]) == [
        {"role": "user", "content": "hi"}
    ]


def test_assistant_calls_and_results_thinking_not_sent() -> None:
    assistant = AssistantMessage(
        content="Checking.",
        thinking=(Thinking(text="hmm", signature="sig"),),
        tool_calls=(call("c1", "weather", '{"city": "Oslo"}'), call("c2", "now", "")),
        stop_reason="tool_use",
    )
    results = [
        ToolMessage(tool_call_id="c1", content="rain"),
        ToolMessage(tool_call_id="c2", content=(TextPart(text="12:00"), TextPart(text="UTC"))),
    ]
    wire = ADAPTER.convert_messages("", [UserMessage(content="go"), assistant, *results])
    assert wire[1:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "tool", "tool_call_id": "c2", "content": "12:00\nUTC"},
    ]


def test_reasoning_only_reply_is_empty_text() -> None:
    reply = AssistantMessage(thinking=(Thinking(text="thinking only"),))
    assert ADAPTER.convert_messages("", [reply]) == [{"role": "assistant", "content": ""}]


def test_aborted_and_failed_replies_skipped_with_their_results() -> None:
    aborted = AssistantMessage(
        content="half", tool_calls=(call("a1", "x", "{"),), stop_reason="aborted"
    )
    failed = AssistantMessage(content="oops", stop_reason="error", error_message="HTTP 500")
    wire = ADAPTER.convert_messages(
        "",
        [
            UserMessage(content="one"),
            aborted,
            ToolMessage(tool_call_id="a1", content="never sent"),
            failed,
            UserMessage(content="two"),
        ],
    )
    assert wire == [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]


def test_unanswered_call_gets_an_error_result_and_orphan_results_are_dropped() -> None:
    reply = AssistantMessage(
        tool_calls=(call("k1", "x", "{}"), call("k2", "y", "{}")), stop_reason="tool_use"
    )
    wire = ADAPTER.convert_messages(
        "",
        [
            ToolMessage(tool_call_id="ghost", content="orphan"),
            reply,
            ToolMessage(tool_call_id="k2", content="ok"),
            ToolMessage(tool_call_id="k2", content="duplicate"),
            UserMessage(content="next"),
        ],
    )
    assert [m["role"] for m in wire] == ["assistant", "tool", "tool", "user"]
    assert wire[1] == {"role": "tool", "tool_call_id": "k2", "content": "ok"}
    assert wire[2]["tool_call_id"] == "k1"
    assert "interrupted" in wire[2]["content"]


def test_images_from_tools_follow_the_run_of_results() -> None:
    reply = AssistantMessage(
        tool_calls=(call("p1", "plot", "{}"), call("p2", "plot", "{}")), stop_reason="tool_use"
    )
    wire = ADAPTER.convert_messages(
        "",
        [
            reply,
            ToolMessage(tool_call_id="p1", content=(TextPart(text="a plot"), IMAGE)),
            ToolMessage(tool_call_id="p2", content=(IMAGE,)),
            UserMessage(content="thanks"),
        ],
    )
    assert [m["role"] for m in wire] == ["assistant", "tool", "tool", "user", "user"]
    assert wire[1]["content"] == "a plot"
    assert wire[2]["content"] == "(see the attached image)"
    image = {"type": "image_url", "image_url": {"url": IMAGE.image_url.url, "detail": "low"}}
    assert wire[3]["content"][1:] == [image, image]
    assert wire[4] == {"role": "user", "content": "thanks"}
    # At the end of the history too.
    tail = ADAPTER.convert_messages(
        "",
        [
            reply,
            ToolMessage(tool_call_id="p1", content=(IMAGE,)),
            ToolMessage(tool_call_id="p2", content="no plot"),
        ],
    )
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user"]


def test_recorded_second_request_round_trips() -> None:
    """Our history of the recorded turn converts to the messages pydantic-ai sent."""
    sent = cassette("openai-chat-stream-tool-call.yaml")[1]["request"]["parsed_body"]
    _, first = replay([body_of(cassette("openai-chat-stream-tool-call.yaml")[0])])
    history: list[Message] = [
        UserMessage(content="What is the capital of the UK? Use the tool, then answer."),
        first,
        ToolMessage(tool_call_id=first.tool_calls[0].id, content="London"),
    ]
    assert ADAPTER.convert_messages("", history) == sent["messages"]


# --- request body -------------------------------------------------------------------------------


def test_body_basics() -> None:
    body = ADAPTER.build_body(
        request([UserMessage(content="hi")], tools=[WEATHER]), "gpt-4.1", prompt_caching=True
    )
    assert body == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "Weather for a city.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
    }


@pytest.mark.parametrize(
    ("level", "effort"),
    [
        ("off", None),
        ("minimal", "minimal"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "high"),
    ],
)
def test_reasoning_effort(level: ThinkingLevel, effort: str | None) -> None:
    body = ADAPTER.build_body(request(thinking_level=level), "o4-mini", prompt_caching=False)
    assert body.get("reasoning_effort") == effort


def test_max_tokens_tool_choice_and_options() -> None:
    body = ADAPTER.build_body(
        request(
            tools=[WEATHER],
            tool_choice="none",
            max_tokens=300,
            options={"temperature": 0.2, "stream": False, "model": "other", "seed": 7},
        ),
        "gpt-4.1",
        prompt_caching=False,
    )
    assert body["tool_choice"] == "none"
    assert body["max_completion_tokens"] == 300
    assert (body["temperature"], body["seed"]) == (0.2, 7)
    assert (body["stream"], body["model"]) == (True, "gpt-4.1")
    no_tools = ADAPTER.build_body(request(tool_choice="none"), "gpt-4.1", prompt_caching=False)
    assert "tool_choice" not in no_tools
    assert "tools" not in no_tools
    assert "max_completion_tokens" not in no_tools


def test_headers() -> None:
    assert ADAPTER.headers(None) == {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }
    assert ADAPTER.headers("sk-1")["Authorization"] == "Bearer sk-1"
    assert "Authorization" not in ADAPTER.headers("")


# --- stop reasons and error bodies --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stop"),
    [
        ("stop", "stop"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("length", "length"),
        ("content_filter", "error"),
        ("error", "error"),
        (None, "stop"),
        ("eos", "stop"),
    ],
)
def test_map_stop_reason(raw: str | None, stop: str) -> None:
    assert ADAPTER.map_stop_reason(raw) == stop


def test_recorded_429_bodies() -> None:
    for interaction in cassette("openai-compatible-429.yaml"):
        body = json.dumps(interaction["response"]["parsed_body"])
        message, code = ADAPTER.error_message(429, body)
        assert message.startswith(
            "Provider returned error: google/gemini-2.0-flash-exp:free is temporarily rate-limited"
        )
        assert code == "429"
        assert classify_status(429, message, code) == "rate_limit"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            '{"error": {"message": "This model\'s maximum context length is 8192 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}',
            ("This model's maximum context length is 8192 tokens.", "context_length_exceeded"),
        ),
        (
            429,
            '{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": null}}',
            ("You exceeded your current quota.", "insufficient_quota"),
        ),
        (
            400,
            '{"object": "error", "message": "bad temperature", "type": "BadRequestError", "code": 400}',
            ("bad temperature", "BadRequestError"),
        ),
        (404, '{"error": "model \\"llama9\\" not found"}', ('model "llama9" not found', None)),
        (422, '{"detail": "Field required"}', ("Field required", None)),
        (
            502,
            "<html><body>Bad gateway</body></html>\n",
            ("<html><body>Bad gateway</body></html>", None),
        ),
        (500, "  ", ("HTTP 500 with an empty body", None)),
        (500, "[1, 2]", ("[1, 2]", None)),
    ],
)
def test_error_bodies(status: int, body: str, expected: tuple[str, str | None]) -> None:
    assert ADAPTER.error_message(status, body) == expected


def test_long_error_bodies_are_clipped() -> None:
    message, _ = ADAPTER.error_message(500, "x" * 5000)
    assert len(message) < 1100


# --- recorded streams ---------------------------------------------------------------------------


def test_recorded_tool_call_stream_at_every_split() -> None:
    body = body_of(cassette("openai-chat-stream-tool-call.yaml")[0])
    reference, final = replay([body])
    assert final.tool_calls == (
        call("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", '{"country":"UK"}'),
    )
    assert final.content is None
    assert final.thinking == ()
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(input=53, output=15, total=68)
    assert (final.model, final.api) == ("gpt-requested", "chat_completions")
    assert reference == [
        StreamStart(model="gpt-requested", api="chat_completions"),
        ToolCallStart(index=0, id="call_ZR5UUuTt3pf61kjwAJIYdVMj", name="get_capital"),
        *(ToolCallDelta(index=0, delta=d) for d in ['{"', "country", '":"', "UK", '"}']),
        ToolCallEnd(index=0, call=final.tool_calls[0]),
    ]
    consistent(reference, final)
    for chunks in splits(body, [b'"finish_reason":"tool_calls"', b"[DONE]", b'"UK"']):
        events, again = replay(chunks)
        assert events == reference
        assert again.model_dump(exclude={"timestamp"}) == final.model_dump(exclude={"timestamp"})


def test_recorded_text_stream_at_every_split() -> None:
    body = body_of(cassette("openai-chat-stream-tool-call.yaml")[1])
    reference, final = replay([body])
    assert final.content == "The capital of the UK is London."
    assert final.tool_calls == ()
    assert final.stop_reason == "stop"
    assert final.usage == Usage(input=78, output=9, total=87)
    assert isinstance(reference[1], TextStart)
    assert isinstance(reference[-1], TextEnd)
    assert "".join(e.delta for e in reference if isinstance(e, TextDelta)) == final.content
    consistent(reference, final)
    for chunks in splits(body, [b" London", b"[DONE]"]):
        events, _ = replay(chunks)
        assert events == reference


def test_recorded_error_event_after_http_200() -> None:
    body = body_of(cassette("openai-compatible-midstream-error.yaml")[0])
    for chunks in [[body], [body[i : i + 7] for i in range(0, len(body), 7)]]:
        parser = ADAPTER.new_parser("gpt-oss")
        with pytest.raises(ProviderError) as caught:
            feed_all(chunks, parser)
        error = caught.value
        assert error.message.startswith("Tool call validation failed")
        assert error.code == "tool_use_failed"
        assert error.kind == "server_error"
        partial = parser.partial()
        assert partial.stop_reason == "aborted"
        assert partial.thinking[0].text.startswith(
            "We need to call the tool with invalid parameters"
        )
        assert not parser.done
        with pytest.raises(ProviderError):
            parser.finish()


def test_recorded_compatible_reasoning_and_whole_tool_call() -> None:
    """Groq: ``delta.reasoning``, a tool call in one delta, usage on the finish chunk."""
    body = body_of(cassette("openai-compatible-midstream-error.yaml")[1])
    reference, final = replay([body])
    assert final.thinking[0].text.startswith("We need to call the function with correct parameter")
    assert final.tool_calls == (
        call(
            "fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", '{"name":"example"}'
        ),
    )
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(input=304, output=49, reasoning=23, total=353)
    kinds = [type(e) for e in reference]
    assert kinds[:2] == [StreamStart, ThinkingStart]
    assert kinds[-4:] == [ThinkingEnd, ToolCallStart, ToolCallDelta, ToolCallEnd]
    consistent(reference, final)
    for chunks in splits(body, [b'"finish_reason":"tool_calls"']):
        assert replay(chunks)[0] == reference


def test_recorded_compatible_reasoning_then_text() -> None:
    body = body_of(cassette("openai-compatible-midstream-error.yaml")[2])
    reference, final = replay([body])
    assert final.content == "The tool returned the expected result for the valid call."
    assert final.thinking[0].text.endswith("Now respond concisely.")
    assert final.stop_reason == "stop"
    assert final.usage == Usage(input=339, output=58, reasoning=38, total=397)
    kinds = [type(e) for e in reference]
    assert kinds.index(ThinkingEnd) < kinds.index(TextStart)
    assert kinds[-1] is TextEnd
    consistent(reference, final)
    assert replay([body[i : i + 7] for i in range(0, len(body), 7)])[0] == reference


# --- cut-off streams ----------------------------------------------------------------------------


def test_cut_before_finish_reason_is_a_format_error_and_partial_keeps_content() -> None:
    body = body_of(cassette("openai-chat-stream-tool-call.yaml")[1])
    cut = body[: body.index(b'"finish_reason":"stop"')]
    for size in (1, 7, len(cut)):
        parser = ADAPTER.new_parser("gpt")
        feed_all([cut[i : i + size] for i in range(0, len(cut), size)], parser)
        assert not parser.done
        with pytest.raises(ProviderError) as caught:
            parser.finish()
        assert caught.value.kind == "format_error"
        partial = parser.partial()
        assert partial.content == "The capital of the UK is London."
        assert partial.stop_reason == "aborted"


def test_cut_mid_tool_call_partial_keeps_the_arguments_so_far() -> None:
    body = body_of(cassette("openai-chat-stream-tool-call.yaml")[0])
    parser = ADAPTER.new_parser("gpt")
    feed_all([body[: body.index(b'"arguments":"UK"')]], parser)
    partial = parser.partial()
    assert partial.tool_calls == (
        call("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", '{"country":"'),
    )
    assert parse_partial(partial.tool_calls[0].function.arguments) == {"country": ""}


def test_finish_reason_without_done_is_complete() -> None:
    """Documented choice: a server that never sends [DONE] has finished at finish_reason."""
    parser = ADAPTER.new_parser("llama")
    feed_all([data(delta(content="hi"), delta("stop"))], parser)
    assert not parser.done
    assert parser.finish().content == "hi"


def test_nothing_after_done_counts() -> None:
    parser = ADAPTER.new_parser("x")
    events = feed_all([data(delta(content="a"), "[DONE]", delta(content="late"))], parser)
    assert parser.done
    assert parser.finish().content == "a"
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(delta="a")]


# --- what compatible servers do -----------------------------------------------------------------


def test_reasoning_content_field_and_cache_hits() -> None:
    """DeepSeek: ``reasoning_content`` and ``prompt_cache_hit_tokens``."""
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_cache_hit_tokens": 64,
    }
    events, final = replay(
        [
            data(
                delta(reasoning_content="Let me"),
                delta(reasoning_content=" see."),
                delta(content="42"),
                delta("stop"),
                {"choices": [], "usage": usage},
                "[DONE]",
            )
        ]
    )
    assert final.thinking == (Thinking(text="Let me see."),)
    assert final.content == "42"
    assert final.usage == Usage(input=36, output=20, cache_read=64, total=120)
    assert [type(e) for e in events] == [
        StreamStart,
        ThinkingStart,
        ThinkingDelta,
        ThinkingDelta,
        ThinkingEnd,
        TextStart,
        TextDelta,
        TextEnd,
    ]


def test_openai_cached_and_reasoning_tokens() -> None:
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 300,
        "total_tokens": 2300,
        "prompt_tokens_details": {"cached_tokens": 1536},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }
    _, final = replay(
        [data(delta(content="ok"), delta("stop"), {"choices": [], "usage": usage}, "[DONE]")]
    )
    assert final.usage == Usage(input=464, output=300, cache_read=1536, reasoning=256, total=2300)


def test_reused_index_missing_index_and_missing_id() -> None:
    """Some servers send every call at index 0 (a new id tells them apart), some send no
    index at all, some no id (we make one up: the result must name the call)."""
    events, final = replay(
        [
            data(
                delta(content="Two calls."),
                tool_delta(index=0, id="a", function={"name": "f", "arguments": '{"x":'}),
                tool_delta(index=0, function={"arguments": "1}"}),
                tool_delta(index=0, id="b", function={"name": "g", "arguments": "{}"}),
                tool_delta(id="c", function={"name": "h"}),
                tool_delta(function={"arguments": '{"y": 2}'}),
                tool_delta(index=5, function={"name": "k", "arguments": "{}"}),
                delta("tool_calls"),
                "[DONE]",
            )
        ]
    )
    calls = final.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls[:3]] == [
        ("a", "f", '{"x":1}'),
        ("b", "g", "{}"),
        ("c", "h", '{"y": 2}'),
    ]
    assert calls[3].id.startswith("call_")
    assert calls[3].function.name == "k"
    assert final.stop_reason == "tool_use"
    starts = [e.index for e in events if isinstance(e, ToolCallStart)]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert starts == [0, 1, 2, 3]
    assert [e.index for e in ends] == [0, 1, 2, 3]
    assert [e.call for e in ends] == list(calls)
    # A call ends when the next one starts, before the finish chunk.
    kinds = [type(e) for e in events]
    assert kinds.index(ToolCallEnd) < kinds.index(ToolCallStart, kinds.index(ToolCallStart) + 1)
    assert isinstance(events[2], TextDelta)
    assert isinstance(events[3], TextEnd)
    consistent(events, final)


def test_stop_with_tool_calls_means_tool_use() -> None:
    _, final = replay(
        [
            data(
                tool_delta(index=0, id="a", function={"name": "f", "arguments": "{}"}),
                delta("stop"),
                "[DONE]",
            )
        ]
    )
    assert final.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("finish", "stop", "has_message"),
    [
        ("length", "length", False),
        ("content_filter", "error", True),
        ("function_call", "tool_use", False),
    ],
)
def test_finish_reasons(finish: str, stop: str, has_message: bool) -> None:
    _, final = replay([data(delta(content="x"), delta(finish), "[DONE]")])
    assert final.stop_reason == stop
    assert (final.error_message is not None) == has_message


@pytest.mark.parametrize(
    ("stream", "kind", "message"),
    [
        (
            data({"error": {"message": "Upstream overloaded", "code": 502}}),
            "overloaded",
            "Upstream overloaded",
        ),
        (
            data(
                {
                    "id": "x",
                    "choices": [],
                    "error": {"message": "Rate limit reached", "type": "rate_limit"},
                }
            ),
            "rate_limit",
            "Rate limit reached",
        ),
        (b"event: error\ndata: something broke\n\n", "server_error", "something broke"),
        (b"data: {not json\n\n", "format_error", "invalid JSON"),
        (b"data: [1, 2]\n\n", "format_error", "unexpected JSON"),
    ],
)
def test_errors_inside_the_stream(stream: bytes, kind: str, message: str) -> None:
    parser = ADAPTER.new_parser("x")
    with pytest.raises(ProviderError) as caught:
        feed_all([data(delta(content="so far")), stream], parser)
    assert caught.value.kind == kind
    assert message in caught.value.message
    assert parser.partial().content == "so far"


def test_empty_and_null_deltas_are_ignored() -> None:
    events, final = replay(
        [
            data(
                delta(role="assistant", content=""),
                delta(content=None, refusal=None),
                {"choices": [{"index": 0}]},
                delta("stop"),
                "[DONE]",
            )
        ]
    )
    assert [type(e) for e in events] == [StreamStart]
    assert final.content is None
    assert final.stop_reason == "stop"


# --- partial JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", None),
        ("   ", None),
        ("nul", None),
        ("x", None),
        ("{", {}),
        ('{"code": "print(1', {"code": "print(1"}),
        ('{"a": 1, "b', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": {"b": true}}', {"a": {"b": True}}),
        ('{"a": "x\\u00', {"a": "x"}),
    ],
)
def test_parse_partial(text: str, value: object) -> None:
    assert parse_partial(text) == value


def test_parse_partial_at_every_prefix_of_a_recorded_call() -> None:
    arguments = '{"country":"UK"}'
    values = [parse_partial(arguments[:i]) for i in range(len(arguments) + 1)]
    assert values[0] is None
    assert values[-1] == {"country": "UK"}
    assert all(v is None or isinstance(v, dict) for v in values)
