"""The Hermes facade: ``chat`` / ``achat`` and ``run_conversation`` / ``arun_conversation``."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from mibyan_jupyter.core import (
    Agent,
    AssistantMessage,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    TranscriptError,
    Usage,
    UserMessage,
    tool,
)
from mibyan_jupyter.core.fakes import Call, Reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _tool_script() -> list[Reply]:
    return [
        Reply(
            text="adding",
            calls=[Call("add", {"a": 1, "b": 2}, id="call_1")],
            usage=Usage(input=100, output=10, cache_read=5, total=110, cost=0.01),
        ),
        Reply(text="It is 3.", usage=Usage(input=130, output=5, reasoning=2, total=135, cost=0.02)),
    ]


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a calculator."},
    {"role": "user", "content": "what is 1+1?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "h1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a":1,"b":1}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "h1", "name": "add", "content": "2"},
    {"role": "assistant", "content": "It is 2."},
]


# -- chat ------------------------------------------------------------------------------------


def test_chat_from_plain_sync_code() -> None:
    model = ScriptedModel(_tool_script())
    agent = Agent(stream_fn=model, tools=[add])
    assert agent.chat("1+2?") == "It is 3."
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool", "assistant"]
    assert not agent.state.is_running


def test_chat_keeps_the_conversation() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(stream_fn=model)
    assert agent.chat("one") == "first answer"
    assert agent.chat("two") == "second answer"
    assert [(m.role, m.content) for m in model.requests[1].messages] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]


def test_chat_returns_the_last_text_when_the_final_reply_is_empty() -> None:
    model = ScriptedModel([Reply(text="working on it", calls=[Call("add", {"a": 1, "b": 1})]), ""])
    agent = Agent(stream_fn=model, tools=[add])
    assert agent.chat("go") == "working on it"


async def test_chat_while_an_event_loop_is_running() -> None:
    threads: list[str] = []

    def reply(request: ModelRequest) -> str:
        threads.append(threading.current_thread().name)
        return "from a worker thread"

    agent = Agent(stream_fn=FunctionModel(reply))
    assert agent.chat("hi") == "from a worker thread"
    assert threads
    assert threads[0] != threading.current_thread().name  # not on this loop's thread
    assert threads[0] == "mibyan-sync"
    assert not agent.state.is_running
    # the agent is still usable from this loop afterwards
    assert await agent.achat("again") == "from a worker thread"


async def test_sync_facade_inside_a_loop_re_raises_errors() -> None:
    agent = Agent(stream_fn=ScriptedModel(["never"]))
    with pytest.raises(TranscriptError):
        agent.run_conversation("x", conversation_history=[{"role": "assistant", "content": "a"}])


async def test_achat() -> None:
    model = ScriptedModel(_tool_script())
    agent = Agent(stream_fn=model, tools=[add])
    assert await agent.achat("1+2?") == "It is 3."
    assert len(model.requests) == 2


# -- run_conversation -------------------------------------------------------------------------


def test_run_conversation_shape() -> None:
    model = ScriptedModel(_tool_script())
    agent = Agent(stream_fn=model, tools=[add], model="calc-1")
    result = agent.run_conversation("1+2?", system_message="You add numbers.")
    assert set(result) == {"messages", "metadata", "usage"}
    messages = result["messages"]
    assert all(isinstance(m, dict) for m in messages)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[0]["content"] == "You add numbers."
    assert messages[1]["content"] == "1+2?"
    assert messages[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        }
    ]
    assert messages[3]["tool_call_id"] == "call_1"
    assert messages[3]["content"] == "3"
    assert messages[4]["content"] == "It is 3."
    assert model.requests[0].system_prompt == "You add numbers."
    metadata = result["metadata"]
    assert metadata["model"] == "calc-1"
    assert metadata["final_response"] == "It is 3."
    assert metadata["end_reason"] == "completed"
    assert metadata["api_calls"] == 2
    assert metadata["error"] is None


def test_run_conversation_without_system_message() -> None:
    agent = Agent(stream_fn=ScriptedModel(["hello"]))
    result = agent.run_conversation("hi")
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]


def test_run_conversation_uses_the_agents_system_prompt() -> None:
    agent = Agent(stream_fn=ScriptedModel(["hello"]), system_prompt="Be brief.")
    result = agent.run_conversation("hi")
    assert result["messages"][0] == {
        "role": "system",
        "content": "Be brief.",
        "timestamp": result["messages"][0]["timestamp"],
    }


def test_task_id_generated_when_absent() -> None:
    agent = Agent(stream_fn=ScriptedModel(["a", "b"]))
    first = agent.run_conversation("one")["metadata"]["task_id"]
    second = agent.run_conversation("two")["metadata"]["task_id"]
    assert isinstance(first, str)
    assert first
    assert first != second
    uuid.UUID(first)  # a real uuid


def test_task_id_kept_when_given() -> None:
    agent = Agent(stream_fn=ScriptedModel(["a"]))
    assert agent.run_conversation("one", task_id="task-42")["metadata"]["task_id"] == "task-42"


def test_usage_is_summed_over_the_run() -> None:
    agent = Agent(stream_fn=ScriptedModel(_tool_script()), tools=[add])
    usage = agent.run_conversation("1+2?")["usage"]
    assert usage == {
        "input": 230,
        "output": 15,
        "cache_read": 5,
        "cache_write": 0,
        "reasoning": 2,
        "total": 245,
        "cost": pytest.approx(0.03),
    }


def test_usage_counts_only_this_run() -> None:
    agent = Agent(
        stream_fn=ScriptedModel(
            [
                Reply(text="a", usage=Usage(input=10, output=1, total=11, cost=1.0)),
                Reply(text="b", usage=Usage(input=20, output=2, total=22, cost=2.0)),
            ]
        )
    )
    agent.run_conversation("one")
    usage = agent.run_conversation("two")["usage"]
    assert (usage["input"], usage["output"], usage["total"], usage["cost"]) == (20, 2, 22, 2.0)


def test_usage_cost_unknown_stays_none() -> None:
    """``Usage.cost`` is None when the price is unknown, "never 0, which would hide
    spending" (messages.py): a run whose every call has an unknown cost reports None."""
    agent = Agent(
        stream_fn=ScriptedModel(
            [Reply(text="a", usage=Usage(input=10, output=1, total=11, cost=None))]
        )
    )
    usage = agent.run_conversation("one")["usage"]
    assert (usage["input"], usage["total"]) == (10, 11)
    assert usage["cost"] is None


def test_usage_cost_partly_known_counts_the_known_part() -> None:
    agent = Agent(
        stream_fn=ScriptedModel(
            [
                Reply(text="x", calls=[Call("add", {"a": 1, "b": 1})], usage=Usage(cost=None)),
                Reply(text="y", usage=Usage(cost=0.5)),
            ]
        ),
        tools=[add],
    )
    assert agent.run_conversation("go")["usage"]["cost"] == pytest.approx(0.5)


# -- conversation_history ---------------------------------------------------------------------


def test_history_as_dicts_continues_the_conversation() -> None:
    model = ScriptedModel(["It is 4."])
    agent = Agent(stream_fn=model, tools=[add], system_prompt="old prompt")
    result = agent.run_conversation("and 2+2?", conversation_history=HISTORY)
    request = model.requests[0]
    assert request.system_prompt == "You are a calculator."
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert request.messages[0].content == "what is 1+1?"
    assert isinstance(request.messages[1], AssistantMessage)
    assert request.messages[1].tool_calls[0].id == "h1"
    assert isinstance(request.messages[2], ToolMessage)
    assert request.messages[2].tool_call_id == "h1"
    assert request.messages[-1].content == "and 2+2?"
    assert [m["role"] for m in result["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert result["messages"][0]["content"] == "You are a calculator."
    assert result["metadata"]["final_response"] == "It is 4."
    assert result["metadata"]["api_calls"] == 1


def test_history_replaces_the_agents_transcript() -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(stream_fn=model)
    agent.chat("forget me")
    agent.run_conversation(
        "hi",
        conversation_history=[
            {"role": "user", "content": "remember me"},
            {"role": "assistant", "content": "ok"},
        ],
    )
    assert [m.content for m in model.requests[1].messages] == ["remember me", "ok", "hi"]


def test_history_of_message_models_and_system_message_argument() -> None:
    model = ScriptedModel(["done"])
    agent = Agent(stream_fn=model)
    history = [
        SystemMessage(content="from history"),
        UserMessage(content="q"),
        AssistantMessage(content="a"),
    ]
    agent.run_conversation("next", system_message="explicit wins", conversation_history=history)
    assert model.requests[0].system_prompt == "explicit wins"
    assert [m.content for m in model.requests[0].messages] == ["q", "a", "next"]


def test_history_round_trips_through_run_conversation_output() -> None:
    """The messages returned by one call are valid history for the next."""
    model = ScriptedModel([*_tool_script(), "again 3"])
    agent = Agent(stream_fn=model, tools=[add])
    first = agent.run_conversation("1+2?", system_message="sys")
    fresh = Agent(stream_fn=model, tools=[add])
    second = fresh.run_conversation("repeat", conversation_history=first["messages"])
    # the system message is rebuilt from the system prompt (with a new timestamp)
    assert second["messages"][0]["content"] == first["messages"][0]["content"] == "sys"
    assert second["messages"][1 : len(first["messages"])] == first["messages"][1:]
    assert second["metadata"]["final_response"] == "again 3"


def test_history_in_plain_openai_format() -> None:
    """OpenAI chat format, as clients write it: tool messages carry no ``name`` (the call
    id links them to their call). Such a history should be accepted."""
    history = [
        {"role": "user", "content": "1+1?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "assistant", "content": "2"},
    ]
    model = ScriptedModel(["ok"])
    agent = Agent(stream_fn=model, tools=[add])
    agent.run_conversation("thanks", conversation_history=history)
    tool_message = model.requests[0].messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.tool_call_id == "c1"
    assert tool_message.content == "2"


@pytest.mark.parametrize(
    ("history", "index"),
    [
        ([{"role": "assistant", "content": "I speak first"}], 0),
        ([{"role": "user", "content": "a"}, {"role": "system", "content": "late"}], 1),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "tool", "tool_call_id": "x", "name": "add", "content": "1"},
            ],
            1,
        ),
    ],
    ids=["assistant-first", "late-system", "orphan-result"],
)
def test_invalid_history_raises_before_any_model_call(
    history: list[dict[str, Any]], index: int
) -> None:
    model = ScriptedModel(["never"])
    agent = Agent(stream_fn=model)
    with pytest.raises(TranscriptError) as info:
        agent.run_conversation("next", conversation_history=history)
    assert info.value.index == index
    assert model.requests == []
    assert agent.state.messages == []  # the transcript was not replaced


def test_history_with_unanswered_tool_calls_raises_before_any_model_call() -> None:
    """A history whose last assistant message has calls without results cannot be
    continued with a user message: it should be refused up front with a TranscriptError
    naming the assistant message, not accepted into the agent's state."""
    history = [
        {"role": "user", "content": "1+1?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
    ]
    model = ScriptedModel(["never"])
    agent = Agent(stream_fn=model, tools=[add])
    with pytest.raises(TranscriptError) as info:
        agent.run_conversation("next", conversation_history=history)
    assert info.value.index == 1
    assert model.requests == []
    assert agent.state.messages == []


def test_invalid_history_dict_raises_validation_error() -> None:
    agent = Agent(stream_fn=ScriptedModel(["never"]))
    with pytest.raises(ValueError, match="role"):
        agent.run_conversation("x", conversation_history=[{"role": "wizard", "content": "hi"}])


async def test_arun_conversation() -> None:
    model = ScriptedModel(_tool_script())
    agent = Agent(stream_fn=model, tools=[add])
    result = await agent.arun_conversation("1+2?", system_message="sys", task_id="t-1")
    assert result["metadata"]["task_id"] == "t-1"
    assert result["metadata"]["final_response"] == "It is 3."
    assert [m["role"] for m in result["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result["usage"]["total"] == 245


async def test_arun_conversation_with_history_and_invalid_history() -> None:
    model = ScriptedModel(["It is 4."])
    agent = Agent(stream_fn=model, tools=[add])
    result = await agent.arun_conversation("and 2+2?", conversation_history=HISTORY)
    assert result["metadata"]["final_response"] == "It is 4."
    assert len(model.requests) == 1
    with pytest.raises(TranscriptError):
        await agent.arun_conversation(
            "x", conversation_history=[{"role": "assistant", "content": "a"}]
        )
    assert len(model.requests) == 1


def test_run_conversation_reports_a_model_error() -> None:
    agent = Agent(stream_fn=ScriptedModel([Reply(error="HTTP 500")]))
    result = agent.run_conversation("hi")
    assert result["metadata"]["end_reason"] == "error"
    assert result["metadata"]["error"] == "HTTP 500"
    assert result["metadata"]["final_response"] == ""
    assert result["messages"][-1]["stop_reason"] == "error"
