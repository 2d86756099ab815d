"""A first end-to-end run through the loop with the scripted model."""

from __future__ import annotations

from support import Recorder, check_grammar

from mibyan_jupyter.core import Agent, ScriptedModel, tool
from mibyan_jupyter.core.fakes import Call, Reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_tool_turn_then_answer() -> None:
    model = ScriptedModel([Reply(text="adding", calls=[Call("add", {"a": 1, "b": 2})]), "It is 3."])
    agent = Agent(stream_fn=model, tools=[add])
    recorder = Recorder()
    agent.subscribe(recorder)
    assert await agent.achat("1+2?") == "It is 3."
    check_grammar(recorder.events)
    assert recorder.types() == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool", "assistant"]
    assert agent.state.messages[2].content == "3"
    # the second request saw the tool result
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool"]


async def test_non_streaming_stream_function() -> None:
    """A stream function may return an awaitable AssistantMessage instead of events: the
    loop emits MessageStart/End without updates and runs the tool calls as usual."""
    from mibyan_jupyter.core import AssistantMessage, FunctionCall, ModelRequest, ToolCall
    from mibyan_jupyter.core.signal import AbortSignal

    replies = iter(
        [
            AssistantMessage(
                tool_calls=(
                    ToolCall(
                        id="c1", function=FunctionCall(name="add", arguments='{"a": 2, "b": 3}')
                    ),
                ),
                stop_reason="tool_use",
            ),
            AssistantMessage(content="5"),
        ]
    )
    seen: list[int] = []

    async def complete(request: ModelRequest, signal: AbortSignal) -> AssistantMessage:
        seen.append(len(request.messages))
        return next(replies)

    agent = Agent(stream_fn=complete, tools=[add])
    recorder = Recorder()
    agent.subscribe(recorder)
    assert await agent.achat("2+3?") == "5"
    check_grammar(recorder.events)
    assert "message_update" not in recorder.types(updates=True)
    assert seen == [1, 3]
    assert agent.state.messages[2].content == "5"


async def test_tool_call_arguments_are_parsed_while_they_stream() -> None:
    """Each ToolCallDelta the loop passes on carries the arguments parsed so far."""
    from mibyan_jupyter.core import MessageUpdate
    from mibyan_jupyter.core.stream import ToolCallDelta

    model = ScriptedModel([Reply(calls=[Call("add", {"a": 12, "b": 345})]), "done"], chunk_size=3)
    agent = Agent(stream_fn=model, tools=[add])
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.achat("go")
    seen = [
        e.event.arguments for e in recorder.of(MessageUpdate) if isinstance(e.event, ToolCallDelta)
    ]
    assert len(seen) > 3
    assert seen[-1] == {"a": 12, "b": 345}
    assert seen[0] == {}  # it grows from nothing: "{\"a" shows no argument yet
    assert any(value == {"a": 12} for value in seen)  # a prefix already shows the first argument
