"""Messages and events: JSON round-trips through the one TypeAdapter, the OpenAI chat dict
shape of ``to_dict`` / ``from_dict``, frozen models, unknown fields, ``Usage`` arithmetic."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mibyan_jupyter.core import (
    AGENT_EVENT_ADAPTER,
    MESSAGE_ADAPTER,
    AgentEnd,
    AgentStart,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    BudgetStatus,
    BudgetUpdated,
    CompactionNotice,
    FallbackNotice,
    FunctionCall,
    ImagePart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RetryNotice,
    SystemMessage,
    TextPart,
    Thinking,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolMessage,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.messages import ImageUrl, content_text, from_dict, to_dict
from mibyan_jupyter.core.notices import NoteNotice
from mibyan_jupyter.core.stream import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

# -- sample messages -------------------------------------------------------------------------

CALL_A = ToolCall(id="call_a", function=FunctionCall(name="add", arguments='{"a": 1, "b": 2}'))
CALL_B = ToolCall(id="call_b", function=FunctionCall(name="plot", arguments="{not json"))

SYSTEM = SystemMessage(content="You are terse.", timestamp=1.5)
USER_TEXT = UserMessage(content="hello", timestamp=2.25)
USER_PARTS = UserMessage(
    content=(
        TextPart(text="what is in this picture?"),
        ImagePart(image_url=ImageUrl(url="data:image/png;base64,iVBORw0KGgo=", detail="low")),
        ImagePart(image_url=ImageUrl(url="https://example.org/cat.png")),
    ),
    timestamp=3.0,
)
ASSISTANT_FULL = AssistantMessage(
    content="Let me add and plot.",
    tool_calls=(CALL_A, CALL_B),
    thinking=(
        Thinking(text="I should add first", signature="sig-anthropic-123"),
        Thinking(text="", encrypted="gAAAAencrypted==", redacted=True),
    ),
    stop_reason="tool_use",
    usage=Usage(
        input=120, output=30, cache_read=50, cache_write=7, reasoning=11, total=150, cost=0.0012
    ),
    model="claude-x",
    api="anthropic_messages",
    timestamp=4.125,
)
ASSISTANT_ERROR = AssistantMessage(
    content=None,
    stop_reason="error",
    usage=Usage(input=10, cost=None),
    error_message="HTTP 500: upstream exploded",
    model="gpt-x",
    api="chat_completions",
    timestamp=5.0,
)
ASSISTANT_ABORTED = AssistantMessage(content="partial te", stop_reason="aborted", timestamp=5.5)
ASSISTANT_LENGTH = AssistantMessage(content="cut o", stop_reason="length", timestamp=5.75)
ASSISTANT_STOP = AssistantMessage(content="It is 3.", timestamp=6.0)
TOOL_OK = ToolMessage(tool_call_id="call_a", name="add", content="3", timestamp=7.0)
TOOL_ERROR = ToolMessage(
    tool_call_id="call_b",
    name="plot",
    content=(
        TextPart(text="a plot"),
        ImagePart(image_url=ImageUrl(url="data:image/png;base64,AAAA")),
    ),
    is_error=True,
    details={"rows": 3, "columns": ["x", "y"], "nested": {"ok": False}},
    timestamp=8.0,
)

ALL_MESSAGES = [
    SYSTEM,
    USER_TEXT,
    USER_PARTS,
    ASSISTANT_FULL,
    ASSISTANT_ERROR,
    ASSISTANT_ABORTED,
    ASSISTANT_LENGTH,
    ASSISTANT_STOP,
    TOOL_OK,
    TOOL_ERROR,
]
IDS = [
    "system",
    "user-text",
    "user-parts",
    "assistant-full",
    "assistant-error",
    "assistant-aborted",
    "assistant-length",
    "assistant-stop",
    "tool-ok",
    "tool-error",
]


# -- round-trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=IDS)
def test_message_adapter_json_round_trip(message: object) -> None:
    text = MESSAGE_ADAPTER.dump_json(message)  # type: ignore[arg-type]
    back = MESSAGE_ADAPTER.validate_json(text)
    assert back == message
    assert type(back) is type(message)
    # stable: a second trip gives the same bytes
    assert MESSAGE_ADAPTER.dump_json(back) == text


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=IDS)
def test_to_dict_from_dict_round_trip(message: object) -> None:
    data = to_dict(message)  # type: ignore[arg-type]
    assert isinstance(data, dict)
    back = from_dict(data)
    assert back == message
    assert type(back) is type(message)


def test_from_dict_passes_models_through() -> None:
    assert from_dict(ASSISTANT_FULL) is ASSISTANT_FULL
    assert from_dict(TOOL_OK) is TOOL_OK


def test_cost_none_survives_round_trips() -> None:
    back = MESSAGE_ADAPTER.validate_json(MESSAGE_ADAPTER.dump_json(ASSISTANT_ERROR))
    assert isinstance(back, AssistantMessage)
    assert back.usage.cost is None
    assert from_dict(to_dict(ASSISTANT_ERROR)).usage.cost is None  # type: ignore[union-attr]


# -- the OpenAI chat dict shape ---------------------------------------------------------------


def test_system_dict_shape() -> None:
    data = to_dict(SYSTEM)
    assert data == {"role": "system", "content": "You are terse.", "timestamp": 1.5}


def test_user_dict_shapes() -> None:
    assert to_dict(USER_TEXT) == {"role": "user", "content": "hello", "timestamp": 2.25}
    data = to_dict(USER_PARTS)
    assert data["role"] == "user"
    assert data["content"] == [
        {"type": "text", "text": "what is in this picture?"},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
        },
        {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}},
    ]


def test_assistant_dict_shape() -> None:
    data = to_dict(ASSISTANT_FULL)
    assert data["role"] == "assistant"
    assert data["content"] == "Let me add and plot."
    assert data["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "plot", "arguments": "{not json"},
        },
    ]
    assert data["thinking"] == [
        {"text": "I should add first", "signature": "sig-anthropic-123", "redacted": False},
        {"text": "", "encrypted": "gAAAAencrypted==", "redacted": True},
    ]
    assert data["stop_reason"] == "tool_use"
    assert data["usage"] == {
        "input": 120,
        "output": 30,
        "cache_read": 50,
        "cache_write": 7,
        "reasoning": 11,
        "total": 150,
        "cost": 0.0012,
    }
    assert data["model"] == "claude-x"
    assert data["api"] == "anthropic_messages"


def test_assistant_dict_leaves_none_out() -> None:
    data = to_dict(ASSISTANT_ERROR)
    assert "content" not in data
    assert "cost" not in data["usage"]  # type: ignore[operator]
    assert data["error_message"] == "HTTP 500: upstream exploded"
    assert data["stop_reason"] == "error"


def test_tool_dict_shape() -> None:
    assert to_dict(TOOL_OK) == {
        "role": "tool",
        "tool_call_id": "call_a",
        "name": "add",
        "content": "3",
        "is_error": False,
        "timestamp": 7.0,
    }
    data = to_dict(TOOL_ERROR)
    assert data["is_error"] is True
    assert data["details"] == {"rows": 3, "columns": ["x", "y"], "nested": {"ok": False}}
    assert data["content"][1] == {  # type: ignore[index]
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }


def test_from_plain_openai_dicts() -> None:
    """Dicts as an OpenAI client would write them (no timestamps, no extras) parse."""
    user = from_dict({"role": "user", "content": "hi"})
    assert isinstance(user, UserMessage)
    assert user.content == "hi"
    assistant = from_dict(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        }
    )
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].function.name == "add"
    assert assistant.stop_reason == "stop"
    assert assistant.usage == Usage()
    parts = from_dict(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        }
    )
    assert isinstance(parts, UserMessage)
    assert isinstance(parts.content, tuple)
    assert isinstance(parts.content[1], ImagePart)
    assert content_text(parts.content) == "look"


def test_content_text() -> None:
    assert content_text(None) == ""
    assert content_text("x") == "x"
    assert content_text(USER_PARTS.content) == "what is in this picture?"


def test_sendable() -> None:
    assert ASSISTANT_FULL.sendable
    assert ASSISTANT_STOP.sendable
    assert ASSISTANT_LENGTH.sendable
    assert not ASSISTANT_ERROR.sendable
    assert not ASSISTANT_ABORTED.sendable


# -- frozen, strict ----------------------------------------------------------------------------


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=IDS)
def test_messages_are_frozen(message: object) -> None:
    with pytest.raises(ValidationError, match="frozen"):
        message.content = "changed"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "obj",
    [
        CALL_A,
        CALL_A.function,
        ASSISTANT_FULL.thinking[0],
        ASSISTANT_FULL.usage,
        USER_PARTS.content[0],  # type: ignore[index]
    ],
    ids=["tool-call", "function", "thinking", "usage", "text-part"],
)
def test_nested_models_are_frozen(obj: object) -> None:
    field = next(iter(type(obj).model_fields))  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="frozen"):
        setattr(obj, field, getattr(obj, field))


@pytest.mark.parametrize(
    "data",
    [
        {"role": "system", "content": "x", "name": "sys"},
        {"role": "user", "content": "x", "extra": 1},
        {"role": "assistant", "content": "x", "reasoning_content": "y"},
        {"role": "tool", "tool_call_id": "c", "name": "n", "content": "x", "status": "ok"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "n", "arguments": "{}"},
                    "x": 1,
                }
            ],
        },
        {"role": "assistant", "content": "x", "usage": {"input": 1, "prompt_tokens": 2}},
        {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]},
    ],
    ids=["system", "user", "assistant", "tool", "tool-call", "usage", "text-part"],
)
def test_unknown_fields_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        MESSAGE_ADAPTER.validate_python(data)


def test_unknown_field_rejected_by_constructor() -> None:
    with pytest.raises(ValidationError):
        UserMessage(content="x", name="bob")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "data",
    [
        {"role": "developer", "content": "x"},
        {"role": "assistant", "stop_reason": "finished"},
        {"role": "user", "content": [{"type": "audio", "data": "x"}]},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "function": {}}]},
    ],
    ids=["role", "stop-reason", "part-type", "call-type"],
)
def test_invalid_values_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MESSAGE_ADAPTER.validate_python(data)


# -- Usage ---------------------------------------------------------------------------------


def test_usage_add_sums_every_count() -> None:
    a = Usage(input=1, output=2, cache_read=3, cache_write=4, reasoning=5, total=6, cost=0.5)
    b = Usage(input=10, output=20, cache_read=30, cache_write=40, reasoning=50, total=60, cost=0.25)
    assert a + b == Usage(
        input=11, output=22, cache_read=33, cache_write=44, reasoning=55, total=66, cost=0.75
    )


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (None, None, None),
        (None, 0.5, 0.5),
        (0.5, None, 0.5),
        (0.0, None, 0.0),
        (None, 0.0, 0.0),
        (0.0, 0.0, 0.0),
        (0.25, 0.5, 0.75),
    ],
)
def test_usage_add_cost(left: float | None, right: float | None, expected: float | None) -> None:
    result = Usage(cost=left) + Usage(cost=right)
    if expected is None:
        assert result.cost is None
    else:
        assert result.cost == pytest.approx(expected)
        assert result.cost is not None


def test_usage_add_is_a_new_frozen_value() -> None:
    a = Usage(input=1)
    b = Usage(output=2)
    c = a + b
    assert (a.input, a.output, b.input, b.output) == (1, 0, 0, 2)
    assert (c.input, c.output) == (1, 2)
    assert sum([Usage(input=1, cost=None)] * 3, Usage(cost=None)) == Usage(input=3, cost=None)


# -- events ----------------------------------------------------------------------------------

_PARTIAL = AssistantMessage(content="Let me", timestamp=9.0, model="m", api="fake")

ALL_EVENTS = [
    AgentStart(),
    AgentEnd(messages=(USER_TEXT, ASSISTANT_FULL, TOOL_OK, TOOL_ERROR, ASSISTANT_STOP)),
    AgentEnd(messages=(), reason="aborted"),
    AgentEnd(messages=(USER_PARTS, ASSISTANT_ERROR), reason="error"),
    AgentEnd(messages=(USER_TEXT, ASSISTANT_STOP), reason="stopped_by_hook"),
    AgentEnd(messages=(USER_TEXT, ASSISTANT_STOP), reason="budget_exhausted"),
    TurnStart(),
    TurnEnd(message=ASSISTANT_FULL, tool_results=(TOOL_OK, TOOL_ERROR)),
    TurnEnd(message=None),
    MessageStart(message=USER_PARTS),
    MessageStart(message=_PARTIAL),
    MessageUpdate(message=_PARTIAL, event=StreamStart(model="m", api="fake")),
    MessageUpdate(message=_PARTIAL, event=TextStart()),
    MessageUpdate(message=_PARTIAL, event=TextDelta(delta="Let me")),
    MessageUpdate(message=_PARTIAL, event=TextEnd()),
    MessageUpdate(message=_PARTIAL, event=ThinkingStart()),
    MessageUpdate(message=_PARTIAL, event=ThinkingDelta(delta="hmm")),
    MessageUpdate(message=_PARTIAL, event=ThinkingEnd(signature="s", encrypted="e", redacted=True)),
    MessageUpdate(message=_PARTIAL, event=ToolCallStart(index=0, id="call_a", name="add")),
    MessageUpdate(message=_PARTIAL, event=ToolCallDelta(index=0, delta='{"a": ')),
    MessageUpdate(message=_PARTIAL, event=ToolCallEnd(index=0, call=CALL_A)),
    MessageUpdate(message=_PARTIAL, event=StreamDone(message=ASSISTANT_FULL)),
    MessageUpdate(message=_PARTIAL, event=StreamError(message=ASSISTANT_ERROR)),
    MessageUpdate(
        message=_PARTIAL,
        event=RetryNotice(
            attempt=1, max_attempts=3, delay=0.5, error_kind="rate_limit", message="429"
        ),
    ),
    MessageUpdate(
        message=_PARTIAL, event=FallbackNotice(from_model="a", to_model="b", reason="overloaded")
    ),
    MessageEnd(message=ASSISTANT_FULL),
    MessageEnd(message=TOOL_ERROR),
    ToolExecutionStart(call_id="call_a", name="add", args={"a": 1, "b": 2}),
    ToolExecutionStart(call_id="call_b", name="plot", args="{not json"),
    ToolExecutionUpdate(call_id="call_a", name="add", partial={"content": "1/2 done"}),
    ToolExecutionEnd(call_id="call_a", name="add", result=TOOL_OK, is_error=False),
    ToolExecutionEnd(call_id="call_b", name="plot", result=TOOL_ERROR, is_error=True),
    ApprovalRequested(call_id="call_a", name="add", args={"a": 1}, reason="side effects"),
    ApprovalResolved(call_id="call_a", name="add", approved=True),
    ApprovalResolved(
        call_id="call_a",
        name="add",
        approved=False,
        scope="always",
        decided_by="timeout",
        reason="no answer in 60 s",
    ),
    BudgetUpdated(
        budgets=(
            BudgetStatus(name="turns", used=3, limit=500),
            BudgetStatus(name="input_tokens", used=1200, limit=None),
            BudgetStatus(name="output_tokens", used=300, limit=None),
            BudgetStatus(name="total_tokens", used=1500, limit=100000),
            BudgetStatus(name="cost", used=0.0125, limit=1.0),
        )
    ),
    RetryNotice(attempt=2, max_attempts=5, delay=1.25, error_kind="overloaded", message="529"),
    FallbackNotice(from_model="gpt-x", to_model="claude-x", reason="HTTP 401"),
    CompactionNotice(messages_before=80, messages_after=22),
    CompactionNotice(
        messages_before=80, messages_after=22, tokens_before=90000, tokens_after=12000, summary="s"
    ),
    CompactionNotice(
        messages_before=8,
        messages_after=4,
        reason="overflow",
        summarised=5,
        kept_head=1,
        kept_tail=2,
        messages=(UserMessage(content="task"), UserMessage(content="[Summary] s")),
    ),
    NoteNotice(notes=("[budget] 70 % of the turns budget is used",)),
]


def _event_id(event: object) -> str:
    inner = getattr(event, "event", None)
    return f"{event.type}-{inner.type}" if inner is not None else event.type  # type: ignore[attr-defined]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=[_event_id(e) for e in ALL_EVENTS])
def test_agent_event_adapter_round_trip(event: object) -> None:
    text = AGENT_EVENT_ADAPTER.dump_json(event)  # type: ignore[arg-type]
    back = AGENT_EVENT_ADAPTER.validate_json(text)
    assert back == event
    assert type(back) is type(event)
    inner = getattr(event, "event", None)
    if inner is not None:
        assert type(back.event) is type(inner)  # type: ignore[union-attr]
    python = AGENT_EVENT_ADAPTER.dump_python(event, mode="json")  # type: ignore[arg-type]
    assert AGENT_EVENT_ADAPTER.validate_python(python) == event


def test_every_event_type_is_covered() -> None:
    """The union's members all appear in ALL_EVENTS (a new event needs a round-trip case)."""
    union = AGENT_EVENT_ADAPTER.json_schema()
    names = {ref.rsplit("/", 1)[-1] for ref in union["discriminator"]["mapping"].values()}
    covered = {type(e).__name__ for e in ALL_EVENTS}
    assert names <= covered, f"no round-trip case for {sorted(names - covered)}"
    assert len(union["discriminator"]["mapping"]) == 17


def test_events_are_frozen_and_strict() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        AgentStart().type = "agent_end"  # type: ignore[misc,assignment]
    with pytest.raises(ValidationError, match="frozen"):
        TurnEnd(message=None).tool_results = ()  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        AGENT_EVENT_ADAPTER.validate_python({"type": "turn_start", "index": 1})
    with pytest.raises(ValidationError):
        AGENT_EVENT_ADAPTER.validate_python({"type": "no_such_event"})
    with pytest.raises(ValidationError):  # MessageUpdate only carries assistant messages
        AGENT_EVENT_ADAPTER.validate_python(
            {
                "type": "message_update",
                "message": to_dict(USER_TEXT),
                "event": {"type": "text_start"},
            }
        )
