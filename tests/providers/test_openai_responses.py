"""The Responses adapter (stateless ``codex_responses``): input items for every message kind,
reasoning round-tripped as encrypted content, the request body, error bodies, the stop-reason
table, and the stream parser replaying real recorded streams
(``support.PROVIDER_STREAMS``, skipped when absent) split into awkward chunks, plus inline streams for
summaries, incomplete responses, failures and cut-off streams."""

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
from mibyan_jupyter.providers.openai_responses import ResponsesAdapter
from mibyan_jupyter.providers.sse import SseDecoder

ADAPTER = ResponsesAdapter()
IMAGE = ImagePart(image_url=ImageUrl(url="data:image/png;base64,iVBORw0KGgo="))
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
    assert parser.done
    return events, parser.finish()


def recorded_events(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads).encode()


def completed(status: str = "completed", reason: str | None = None, **usage: int) -> dict[str, Any]:
    response: dict[str, Any] = {"status": status, "usage": usage or None}
    if reason:
        response["incomplete_details"] = {"reason": reason}
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return {"type": kind, "response": response}


def text_item(*deltas: str, item_id: str = "msg_1") -> list[dict[str, Any]]:
    item = {"type": "message", "id": item_id, "role": "assistant", "content": []}
    done = {**item, "content": [{"type": "output_text", "text": "".join(deltas)}]}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({"type": "response.output_text.delta", "item_id": item_id, "delta": d} for d in deltas),
        {"type": "response.output_item.done", "output_index": 0, "item": done},
    ]


def consistent(events: list[StreamEvent], final: AssistantMessage) -> None:
    """The core's PartialMessage, fed our events, agrees with finish()."""
    partial = PartialMessage("x")
    for event in events:
        partial.apply(event)
    snap = partial.snapshot()
    assert snap.content == final.content
    assert snap.tool_calls == final.tool_calls
    assert [(t.text, t.signature, t.encrypted) for t in snap.thinking] == [
        (t.text, t.signature, t.encrypted) for t in final.thinking
    ]
    assert isinstance(events[0], StreamStart)
    assert sum(isinstance(e, StreamStart) for e in events) == 1


# --- message conversion -------------------------------------------------------------------------


def test_instructions_user_text_parts_and_images() -> None:
    parts = (TextPart(text="what is this?"), IMAGE)
    assert ADAPTER.convert_messages(
        "Be brief.",
        [
            UserMessage(content="hi"),
            SystemMessage(content="Now in French."),
            UserMessage(content=parts),
        ],
    ) == {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"role": "system", "content": "Now in French."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this?"},
                    {"type": "input_image", "image_url": IMAGE.image_url.url, "detail": "auto"},
                ],
            },
        ],
    }
    assert ADAPTER.convert_messages("", []) == {"input": []}


def test_assistant_items_reasoning_text_calls_then_results() -> None:
    assistant = AssistantMessage(
        content="Checking.",
        thinking=(
            Thinking(text="Plan: call the tool.", signature="rs_1", encrypted="gAAA-1"),
            Thinking(text="from another provider", signature="sig-anthropic"),
            Thinking(text="", signature="rs_2", encrypted="gAAA-2"),
        ),
        tool_calls=(call("call_1", "weather", '{"city": "Oslo"}'), call("call_2", "now", "")),
        stop_reason="tool_use",
    )
    results = [
        ToolMessage(tool_call_id="call_1", content="rain"),
        ToolMessage(tool_call_id="call_2", content=(TextPart(text="12:00"), TextPart(text="UTC"))),
    ]
    assert ADAPTER.convert_messages("", [assistant, *results])["input"] == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Plan: call the tool."}],
            "encrypted_content": "gAAA-1",
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAA-2"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "now", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
        {"type": "function_call_output", "call_id": "call_2", "output": "12:00\nUTC"},
    ]


def test_tool_result_with_an_image() -> None:
    reply = AssistantMessage(tool_calls=(call("p1", "plot", "{}"),), stop_reason="tool_use")
    result = ToolMessage(tool_call_id="p1", content=(TextPart(text="a plot"), IMAGE))
    assert ADAPTER.convert_messages("", [reply, result])["input"][-1] == {
        "type": "function_call_output",
        "call_id": "p1",
        "output": [
            {"type": "input_text", "text": "a plot"},
            {"type": "input_image", "image_url": IMAGE.image_url.url, "detail": "auto"},
        ],
    }


def test_aborted_failed_and_unpaired() -> None:
    aborted = AssistantMessage(
        content="half", tool_calls=(call("a1", "x", "{"),), stop_reason="aborted"
    )
    failed = AssistantMessage(content="oops", stop_reason="error")
    dangling = AssistantMessage(tool_calls=(call("d1", "y", "{}"),), stop_reason="tool_use")
    items = ADAPTER.convert_messages(
        "",
        [
            UserMessage(content="one"),
            aborted,
            ToolMessage(tool_call_id="a1", content="never sent"),
            failed,
            dangling,
            UserMessage(content="two"),
        ],
    )["input"]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
    ]
    assert items[2]["call_id"] == "d1"
    assert "interrupted" in items[2]["output"]


def test_thinking_round_trip_through_the_recorded_reasoning_stream() -> None:
    """What the parser keeps of a reasoning item is what the next request sends back."""
    body = body_of(cassette("openai-responses-stream-reasoning-usage.yaml")[0])
    done = [e for e in recorded_events(body) if e["type"] == "response.output_item.done"]
    _, reply = replay([body])
    history: list[Message] = [
        UserMessage(content="Calculate 100 * 200 / 3"),
        reply,
        ToolMessage(tool_call_id=reply.tool_calls[0].id, content="6666"),
    ]
    items = ADAPTER.convert_messages("", history)["input"]
    assert items[1:] == [
        {
            "type": "reasoning",
            "summary": [],
            "encrypted_content": done[0]["item"]["encrypted_content"],
        },
        {
            "type": "function_call",
            "call_id": "call_CWXgs68YprAjp6t0371hiPOI",
            "name": "final_result",
            "arguments": '{"result":6666}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_CWXgs68YprAjp6t0371hiPOI",
            "output": "6666",
        },
    ]


def test_recorded_second_request_has_the_same_items() -> None:
    """Our history of the recorded turn gives the item sequence pydantic-ai sent."""
    interactions = cassette("openai-responses-stream-function-call.yaml")
    sent = interactions[1]["request"]["parsed_body"]["input"]
    _, reply = replay([body_of(interactions[0])])
    history: list[Message] = [
        UserMessage(content="What is the capital of France?"),
        reply,
        ToolMessage(tool_call_id=reply.tool_calls[0].id, content="Paris"),
    ]
    items = ADAPTER.convert_messages("", history)["input"]
    assert [i.get("type", "message") for i in items] == [i.get("type", "message") for i in sent]
    assert (items[1]["name"], items[1]["arguments"]) == (sent[1]["name"], sent[1]["arguments"])
    assert items[2]["output"] == sent[2]["output"]
    assert items[1]["call_id"] == items[2]["call_id"] == "call_kL0PCQV7M2WMoVX8V8OtYSAL"


# --- request body -------------------------------------------------------------------------------


def test_body_basics() -> None:
    body = ADAPTER.build_body(
        request([UserMessage(content="hi")], tools=[WEATHER]), "gpt-4.1", prompt_caching=True
    )
    assert body == {
        "model": "gpt-4.1",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "stream": True,
        "store": False,
        "tools": [
            {
                "type": "function",
                "name": "weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            }
        ],
    }


@pytest.mark.parametrize(
    ("model", "level", "encrypted"),
    [
        ("gpt-4.1", "off", False),
        ("gpt-4o", "off", False),
        ("gpt-5-chat-latest", "off", False),
        ("gpt-5", "off", True),
        ("gpt-5.1-codex", "off", True),
        ("o4-mini", "off", True),
        ("openai/gpt-oss-120b", "off", True),
        ("my-local-model", "low", True),
    ],
)
def test_encrypted_reasoning_only_from_reasoning_models(
    model: str, level: ThinkingLevel, encrypted: bool
) -> None:
    body = ADAPTER.build_body(request(thinking_level=level), model, prompt_caching=False)
    assert ("include" in body) == encrypted
    if encrypted:
        assert body["include"] == ["reasoning.encrypted_content"]


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
def test_reasoning_effort_and_summary(level: ThinkingLevel, effort: str | None) -> None:
    body = ADAPTER.build_body(request(thinking_level=level), "gpt-5", prompt_caching=False)
    assert body.get("reasoning") == (effort and {"effort": effort, "summary": "auto"})


def test_max_tokens_tool_choice_and_options() -> None:
    body = ADAPTER.build_body(
        request(
            tools=[WEATHER],
            tool_choice="none",
            max_tokens=300,
            options={
                "temperature": 0.2,
                "stream": False,
                "input": [],
                "include": [],
                "service_tier": "flex",
            },
        ),
        "gpt-5",
        prompt_caching=False,
    )
    assert body["tool_choice"] == "none"
    assert body["max_output_tokens"] == 300
    assert (body["temperature"], body["service_tier"], body["include"]) == (0.2, "flex", [])
    assert body["stream"] is True
    assert body["input"] == []  # ours (no messages), not the option's
    no_tools = ADAPTER.build_body(request(tool_choice="none"), "gpt-5", prompt_caching=False)
    assert "tool_choice" not in no_tools
    assert "max_output_tokens" not in no_tools


def test_headers() -> None:
    assert ADAPTER.headers(None) == {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }
    assert ADAPTER.headers("sk-1")["Authorization"] == "Bearer sk-1"


# --- stop reasons and error bodies --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stop"),
    [
        ("completed", "stop"),
        (None, "stop"),
        ("incomplete", "length"),
        ("max_output_tokens", "length"),
        ("content_filter", "error"),
        ("failed", "error"),
        ("cancelled", "aborted"),
        ("queued", "stop"),
    ],
)
def test_map_stop_reason(raw: str | None, stop: str) -> None:
    assert ADAPTER.map_stop_reason(raw) == stop


def test_recorded_400() -> None:
    [interaction] = cassette("openai-responses-400.yaml")
    body = json.dumps(interaction["response"]["parsed_body"])
    message, code = ADAPTER.error_message(400, body)
    assert (
        message
        == "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead."
    )
    assert code == "decimal_below_min_value"
    assert classify_status(400, message, code) == "bad_request"


def test_encrypted_content_refused_body() -> None:
    body = '{"error": {"message": "Encrypted content is not supported with this model.", "type": "invalid_request_error", "param": "include", "code": null}}'
    assert ADAPTER.error_message(400, body) == (
        "Encrypted content is not supported with this model.",
        "invalid_request_error",
    )


# --- recorded streams ---------------------------------------------------------------------------


def test_recorded_function_call_at_every_split() -> None:
    body = body_of(cassette("openai-responses-stream-function-call.yaml")[0])
    reference, final = replay([body])
    the_call = call("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", '{"country":"France"}')
    assert final.tool_calls == (the_call,)
    assert final.content is None
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(input=255, output=16, total=271)
    assert (final.model, final.api) == ("gpt-requested", "codex_responses")
    assert reference == [
        StreamStart(model="gpt-requested", api="codex_responses"),
        ToolCallStart(index=0, id="call_kL0PCQV7M2WMoVX8V8OtYSAL", name="get_capital"),
        *(ToolCallDelta(index=0, delta=d) for d in ['{"', "country", '":"', "France", '"}']),
        ToolCallEnd(index=0, call=the_call),
    ]
    consistent(reference, final)
    for chunks in splits(
        body, [b"event: response.function_call_arguments.done", b"event: response.completed"]
    ):
        events, again = replay(chunks)
        assert events == reference
        assert again.model_dump(exclude={"timestamp"}) == final.model_dump(exclude={"timestamp"})


def test_recorded_text_turn_at_every_split() -> None:
    body = body_of(cassette("openai-responses-stream-function-call.yaml")[1])
    reference, final = replay([body])
    assert final.content == "The capital of France is Paris."
    assert final.tool_calls == ()
    assert final.stop_reason == "stop"
    assert final.usage == Usage(input=278, output=9, total=287)
    assert [type(e) for e in reference] == [StreamStart, TextStart] + [TextDelta] * 7 + [TextEnd]
    consistent(reference, final)
    for chunks in splits(body, [b'"delta":" Paris"', b"event: response.output_item.done"]):
        assert replay(chunks)[0] == reference


def test_recorded_reasoning_with_encrypted_content_and_usage() -> None:
    body = body_of(cassette("openai-responses-stream-reasoning-usage.yaml")[0])
    done = [e for e in recorded_events(body) if e["type"] == "response.output_item.done"]
    encrypted = done[0]["item"]["encrypted_content"]
    reference, final = replay([body])
    assert final.thinking == (
        Thinking(
            text="",
            signature="rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405",
            encrypted=encrypted,
        ),
    )
    assert final.tool_calls == (
        call("call_CWXgs68YprAjp6t0371hiPOI", "final_result", '{"result":6666}'),
    )
    assert final.stop_reason == "tool_use"
    assert final.usage == Usage(input=53, output=469, reasoning=448, total=522)
    assert [type(e) for e in reference[:3]] == [StreamStart, ThinkingStart, ThinkingEnd]
    assert reference[2] == ThinkingEnd(signature=final.thinking[0].signature, encrypted=encrypted)
    consistent(reference, final)
    for chunks in splits(body, [b'"sequence_number":3', b'"delta":"666"']):
        assert replay(chunks)[0] == reference


# --- inline streams -----------------------------------------------------------------------------


def test_summary_parts_become_paragraphs_of_one_thinking_block() -> None:
    item = {"type": "reasoning", "id": "rs_9", "summary": []}
    events, final = replay(
        [
            sse(
                {"type": "response.created", "response": {"status": "in_progress"}},
                {"type": "response.output_item.added", "output_index": 0, "item": item},
                {"type": "response.reasoning_summary_part.added", "summary_index": 0},
                {
                    "type": "response.reasoning_summary_text.delta",
                    "summary_index": 0,
                    "delta": "First",
                },
                {"type": "response.reasoning_summary_part.added", "summary_index": 1},
                {
                    "type": "response.reasoning_summary_text.delta",
                    "summary_index": 1,
                    "delta": "Second",
                },
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": {**item, "encrypted_content": "enc"},
                },
                *text_item("Answer."),
                completed(
                    input_tokens=10,
                    output_tokens=5,
                    total_tokens=15,
                    input_tokens_details={"cached_tokens": 4},
                ),
            )
        ]
    )
    assert final.thinking == (Thinking(text="First\n\nSecond", signature="rs_9", encrypted="enc"),)
    assert final.content == "Answer."
    assert final.usage == Usage(input=6, output=5, cache_read=4, total=15)
    assert [type(e) for e in events] == [
        StreamStart,
        ThinkingStart,
        ThinkingDelta,
        ThinkingDelta,
        ThinkingDelta,
        ThinkingEnd,
        TextStart,
        TextDelta,
        TextEnd,
    ]
    consistent(events, final)


def test_items_sent_whole_without_deltas() -> None:
    """A server (or proxy) that skips the delta events still gives the whole reply."""
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Why."}],
    }
    message = {
        "type": "message",
        "id": "m",
        "content": [{"type": "output_text", "text": "Hi"}, {"type": "refusal", "refusal": "!"}],
    }
    function = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "f",
        "arguments": '{"a":1}',
    }
    events, final = replay(
        [
            sse(
                {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
                {"type": "response.output_item.added", "output_index": 1, "item": message},
                {"type": "response.output_item.done", "output_index": 1, "item": message},
                {"type": "response.output_item.done", "output_index": 2, "item": function},
                completed(),
            )
        ]
    )
    assert final.thinking == (Thinking(text="Why.", signature="rs_1"),)
    assert final.content == "Hi!"
    assert final.tool_calls == (call("c1", "f", '{"a":1}'),)
    assert final.usage == Usage()
    consistent(events, final)


def test_arguments_done_is_authoritative_and_refusal_is_text() -> None:
    added = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    events, final = replay(
        [
            sse(
                {"type": "response.output_item.added", "output_index": 0, "item": added},
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "delta": '{"a":',
                },
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "arguments": '{"a": 2}',
                },
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "delta": "late",
                },
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": {**added, "arguments": "ignored"},
                },
                {"type": "response.refusal.delta", "item_id": "m", "delta": "I can't."},
                completed(),
            )
        ]
    )
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [e.call.function.arguments for e in ends] == ['{"a": 2}']
    assert final.tool_calls[0].function.arguments == '{"a": 2}'
    assert final.content == "I can't."
    assert final.stop_reason == "tool_use"
    consistent(events, final)


@pytest.mark.parametrize(
    ("reason", "stop", "has_message"),
    [
        ("max_output_tokens", "length", False),
        ("content_filter", "error", True),
        (None, "length", False),
    ],
)
def test_incomplete_responses(reason: str | None, stop: str, has_message: bool) -> None:
    _, final = replay(
        [sse(*text_item("cut"), completed("incomplete", reason, input_tokens=3, output_tokens=2))]
    )
    assert final.stop_reason == stop
    assert (final.error_message is not None) == has_message
    assert final.usage == Usage(input=3, output=2, total=5)


@pytest.mark.parametrize(
    ("payload", "kind", "code"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "The server had an error."},
                },
            },
            "server_error",
            "server_error",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "rate_limit_exceeded", "message": "Slow down."},
                },
            },
            "rate_limit",
            "rate_limit_exceeded",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {
                        "code": "context_length_exceeded",
                        "message": "Your input exceeds the context window of this model.",
                    },
                },
            },
            "context_overflow",
            "context_length_exceeded",
        ),
        (
            {
                "type": "error",
                "code": "server_is_overloaded",
                "message": "Overloaded.",
                "param": None,
            },
            "overloaded",
            "server_is_overloaded",
        ),
        ({"type": "error", "code": None, "message": "Something odd."}, "server_error", None),
    ],
)
def test_failures_inside_the_stream(payload: dict[str, Any], kind: str, code: str | None) -> None:
    parser = ADAPTER.new_parser("gpt")
    with pytest.raises(ProviderError) as caught:
        feed_all([sse(*text_item("so far")[:2], payload)], parser)
    assert (caught.value.kind, caught.value.code) == (kind, code)
    assert parser.partial().content == "so far"
    assert parser.partial().stop_reason == "aborted"


def test_error_event_with_plain_text_data() -> None:
    parser = ADAPTER.new_parser("gpt")
    with pytest.raises(ProviderError, match="upstream went away"):
        feed_all([b"event: error\ndata: upstream went away\n\n"], parser)


# --- cut-off streams ----------------------------------------------------------------------------


def test_cut_before_completed_is_a_format_error_and_partial_keeps_content() -> None:
    body = body_of(cassette("openai-responses-stream-function-call.yaml")[1])
    cut = body[: body.index(b"event: response.completed")]
    for size in (1, 7, len(cut)):
        parser = ADAPTER.new_parser("gpt")
        feed_all([cut[i : i + size] for i in range(0, len(cut), size)], parser)
        assert not parser.done
        with pytest.raises(ProviderError) as caught:
            parser.finish()
        assert caught.value.kind == "format_error"
        partial = parser.partial()
        assert partial.content == "The capital of France is Paris."
        assert partial.stop_reason == "aborted"


def test_cut_mid_reasoning_and_mid_call() -> None:
    body = body_of(cassette("openai-responses-stream-reasoning-usage.yaml")[0])
    parser = ADAPTER.new_parser("gpt")
    feed_all([body[: body.index(b'"delta":"666"')]], parser)
    partial = parser.partial()
    assert partial.thinking[0].encrypted is not None
    assert partial.tool_calls == (
        call("call_CWXgs68YprAjp6t0371hiPOI", "final_result", '{"result":'),
    )
    # An aborted reply is never sent back.
    assert ADAPTER.convert_messages("", [partial])["input"] == []


def test_nothing_after_completed_counts() -> None:
    parser = ADAPTER.new_parser("gpt")
    events = feed_all([sse(*text_item("a"), completed(), *text_item("late"))], parser)
    assert parser.finish().content == "a"
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(delta="a")]
