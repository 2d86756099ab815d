"""Steering and follow-up queues, continue, the loop's hooks, and the Agent's run rules
(busy error, failing subscribers, wait_for_idle)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentContext,
    AgentEnd,
    AgentEvent,
    AssistantMessage,
    Call,
    FunctionCall,
    LoopConfig,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Reply,
    ScriptedModel,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolMessage,
    TurnContext,
    TurnUpdate,
    UserMessage,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
    tool,
)
from mibyan_jupyter.core.messages import content_text

# -- helpers ------------------------------------------------------------------------------


def label(event: AgentEvent) -> str | None:
    """A compact label for an event; streaming updates and budget events are left out."""
    if isinstance(event, MessageStart | MessageEnd):
        message = event.message
        sign = "+" if isinstance(event, MessageStart) else "-"
        if isinstance(message, ToolMessage):
            return f"{sign}tool:{message.tool_call_id}"
        if isinstance(message, AssistantMessage):
            if isinstance(event, MessageStart):
                return "+assistant"
            calls = ",".join(c.id for c in message.tool_calls)
            return f"-assistant:{message.content or ''}{'[' + calls + ']' if calls else ''}"
        return f"{sign}{message.role}:{content_text(message.content)}"  # type: ignore[arg-type]
    if isinstance(event, ToolExecutionStart):
        return f"exec+{event.call_id}"
    if isinstance(event, ToolExecutionEnd):
        return f"exec-{event.call_id}"
    if isinstance(event, AgentEnd):
        return f"agent_end:{event.reason}"
    if event.type in ("message_update", "budget_updated"):
        return None
    return event.type


def trace(recorder: Recorder) -> list[str]:
    return [text for e in recorder.events if (text := label(e)) is not None]


def roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


def texts(messages: Sequence[Message]) -> list[str]:
    return [content_text(m.content) for m in messages]  # type: ignore[arg-type]


def new_agent(stream: ScriptedModel, **options: object) -> tuple[Agent, Recorder]:
    agent = Agent(stream_fn=stream, **options)  # type: ignore[arg-type]
    recorder = Recorder()
    agent.subscribe(recorder)
    return agent, recorder


def assistant_tail() -> list[Message]:
    return [UserMessage(content="hi"), AssistantMessage(content="hello")]


# -- steering -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_steering_from_a_tool_is_injected_after_the_whole_batch(mode: str) -> None:
    holder: dict[str, Agent] = {}

    @tool
    async def first() -> str:
        """Steers the agent while the batch runs."""
        holder["agent"].steer("change of plan")
        return "first done"

    @tool
    async def second() -> str:
        """Finishes after the first."""
        await asyncio.sleep(0.02)
        return "second done"

    model = ScriptedModel(
        [Reply(text="working", calls=[Call("first", id="a"), Call("second", id="b")]), "ok"]
    )
    agent, recorder = new_agent(model, tools=[first, second], tool_execution=mode)
    holder["agent"] = agent
    await agent.prompt("go")
    check_grammar(recorder.events)
    if mode == "parallel":  # ends in completion order, then the results in call order
        batch = ["exec+a", "exec+b", "exec-a", "exec-b", "+tool:a", "-tool:a", "+tool:b", "-tool:b"]
    else:  # one call after the other, each with its result
        batch = ["exec+a", "exec-a", "+tool:a", "-tool:a", "exec+b", "exec-b", "+tool:b", "-tool:b"]
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+user:go",
        "-user:go",
        "+assistant",
        "-assistant:working[a,b]",
        *batch,  # every result first...
        "turn_end",
        "turn_start",
        "+user:change of plan",  # ...then the steering message...
        "-user:change of plan",
        "+assistant",  # ...then the model call
        "-assistant:ok",
        "turn_end",
        "agent_end:completed",
    ]
    assert texts(model.requests[1].messages) == [
        "go",
        "working",
        "first done",
        "second done",
        "change of plan",
    ]
    assert agent.queued == ((), ())


@pytest.mark.parametrize(("mode", "calls"), [("one-at-a-time", 3), ("all", 2)])
async def test_steering_queue_modes(mode: str, calls: int) -> None:
    holder: dict[str, Agent] = {}

    @tool
    def interrupt() -> str:
        """Queue two steering messages (from a worker thread)."""
        holder["agent"].steer("s1")
        holder["agent"].steer("s2")
        return "queued"

    model = ScriptedModel([Reply(calls=[Call("interrupt", id="i")]), "r1", "r2", "unused"])
    agent, recorder = new_agent(model, tools=[interrupt], steering_mode=mode)
    holder["agent"] = agent
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert len(model.requests) == calls
    if mode == "one-at-a-time":
        assert texts(model.requests[1].messages)[-1] == "s1"
        assert texts(model.requests[2].messages)[-2:] == ["r1", "s2"]
    else:
        assert texts(model.requests[1].messages)[-1] == "s1\n\ns2"  # merged for the model
        assert texts(agent.state.messages)[-3:] == ["s1", "s2", "r1"]  # kept apart here


async def test_initial_steering_poll_delivers_a_message_queued_before_prompt() -> None:
    model = ScriptedModel(["answer"])
    agent, recorder = new_agent(model)
    agent.steer("also this")
    await agent.prompt("question")
    check_grammar(recorder.events)
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+user:question",
        "-user:question",
        "+user:also this",
        "-user:also this",
        "+assistant",
        "-assistant:answer",
        "turn_end",
        "agent_end:completed",
    ]
    assert len(model.requests) == 1
    assert texts(model.requests[0].messages) == ["question\n\nalso this"]
    assert roles(agent.state.messages) == ["user", "user", "assistant"]


# -- follow-up ----------------------------------------------------------------------------


async def test_follow_up_waits_until_the_agent_would_stop() -> None:
    holder: dict[str, Agent] = {}

    @tool
    def look() -> str:
        """Queue a follow-up while tools run."""
        holder["agent"].follow_up("and then?")
        return "seen"

    model = ScriptedModel([Reply(calls=[Call("look", id="l")]), "answer one", "answer two"])
    agent, recorder = new_agent(model, tools=[look])
    holder["agent"] = agent
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+user:go",
        "-user:go",
        "+assistant",
        "-assistant:[l]",
        "exec+l",
        "exec-l",
        "+tool:l",
        "-tool:l",
        "turn_end",
        "turn_start",  # not after the tool turn...
        "+assistant",
        "-assistant:answer one",
        "turn_end",
        "turn_start",  # ...only when the agent would stop
        "+user:and then?",
        "-user:and then?",
        "+assistant",
        "-assistant:answer two",
        "turn_end",
        "agent_end:completed",
    ]
    assert "and then?" not in texts(model.requests[1].messages)
    assert texts(model.requests[2].messages)[-2:] == ["answer one", "and then?"]


async def test_follow_up_one_at_a_time_makes_one_model_call_each() -> None:
    model = ScriptedModel(["r0", "r1", "r2"])
    agent, recorder = new_agent(model, follow_up_mode="one-at-a-time")
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("p")
    check_grammar(recorder.events)
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+user:p",
        "-user:p",
        "+assistant",
        "-assistant:r0",
        "turn_end",
        "turn_start",
        "+user:f1",
        "-user:f1",
        "+assistant",
        "-assistant:r1",
        "turn_end",
        "turn_start",
        "+user:f2",
        "-user:f2",
        "+assistant",
        "-assistant:r2",
        "turn_end",
        "agent_end:completed",
    ]
    assert texts(model.requests[1].messages) == ["p", "r0", "f1"]
    assert texts(model.requests[2].messages) == ["p", "r0", "f1", "r1", "f2"]
    assert agent.queued == ((), ())


async def test_follow_up_all_delivers_every_message_at_once() -> None:
    model = ScriptedModel(["r0", "r1", "unused"])
    agent, recorder = new_agent(model, follow_up_mode="all")
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("p")
    check_grammar(recorder.events)
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+user:p",
        "-user:p",
        "+assistant",
        "-assistant:r0",
        "turn_end",
        "turn_start",
        "+user:f1",
        "-user:f1",
        "+user:f2",
        "-user:f2",
        "+assistant",
        "-assistant:r1",
        "turn_end",
        "agent_end:completed",
    ]
    assert len(model.requests) == 2
    assert texts(model.requests[1].messages) == ["p", "r0", "f1\n\nf2"]
    assert roles(model.requests[1].messages) == ["user", "assistant", "user"]
    assert texts(agent.state.messages) == ["p", "r0", "f1", "f2", "r1"]


# -- queues survive an abort ----------------------------------------------------------------


async def test_queued_messages_survive_an_abort_mid_stream() -> None:
    model = ScriptedModel(["a long reply that will be cut", "reply", "follow reply"], delay=0.01)
    agent, recorder = new_agent(model)

    def queue_then_abort(event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate):
            agent.steer("steer me")
            agent.follow_up("follow me")
            agent.abort()

    stop = agent.subscribe(queue_then_abort)
    await agent.prompt("first")
    stop()
    check_grammar(recorder.events)
    assert recorder.events[-1].reason == "aborted"  # type: ignore[union-attr]
    steering, follow_ups = agent.queued
    assert texts(steering) == ["steer me"]
    assert texts(follow_ups) == ["follow me"]

    second = Recorder()
    agent.subscribe(second)
    await agent.prompt("second")
    check_grammar(second.events)
    assert agent.queued == ((), ())
    assert texts(model.requests[1].messages) == ["first\n\nsecond\n\nsteer me"]
    assert texts(model.requests[2].messages) == [
        "first\n\nsecond\n\nsteer me",
        "reply",
        "follow me",
    ]


async def test_queued_messages_survive_an_abort_during_a_tool_batch() -> None:
    holder: dict[str, Agent] = {}

    @tool
    async def busy() -> str:
        """Queue messages, then wait to be aborted."""
        agent = holder["agent"]
        agent.steer("steer me")
        agent.follow_up("follow me")
        agent.abort()
        await asyncio.sleep(10)
        return "never"

    model = ScriptedModel([Reply(calls=[Call("busy", id="b")]), "next", "last"])
    agent, recorder = new_agent(model, tools=[busy])
    holder["agent"] = agent
    await asyncio.wait_for(agent.prompt("go"), 2)
    check_grammar(recorder.events)
    assert recorder.events[-1].reason == "aborted"  # type: ignore[union-attr]
    assert tuple(texts(q) for q in agent.queued) == (["steer me"], ["follow me"])

    await agent.prompt("again")
    check_each_run(recorder.events)
    assert texts(model.requests[1].messages)[-1] == "again\n\nsteer me"
    assert texts(model.requests[2].messages)[-1] == "follow me"
    assert agent.queued == ((), ())


# -- continue -------------------------------------------------------------------------------


async def test_continue_from_an_assistant_tail_drains_steering_first() -> None:
    model = ScriptedModel(["after steer", "after follow"])
    agent, recorder = new_agent(model, messages=assistant_tail())
    agent.follow_up("f")
    agent.steer("s")
    await agent.continue_()
    check_grammar(recorder.events)
    assert texts(model.requests[0].messages) == ["hi", "hello", "s"]
    assert texts(model.requests[1].messages) == ["hi", "hello", "s", "after steer", "f"]
    assert trace(recorder)[:4] == ["agent_start", "turn_start", "+user:s", "-user:s"]
    assert agent.queued == ((), ())


async def test_continue_from_an_assistant_tail_then_follow_ups() -> None:
    model = ScriptedModel(["after follow"])
    agent, recorder = new_agent(model, messages=assistant_tail())
    agent.follow_up("f")
    await agent.continue_()
    check_grammar(recorder.events)
    assert texts(model.requests[0].messages) == ["hi", "hello", "f"]
    assert texts(agent.state.messages) == ["hi", "hello", "f", "after follow"]


async def test_continue_from_an_assistant_tail_with_nothing_queued_is_refused() -> None:
    model = ScriptedModel(["unused"])
    agent, recorder = new_agent(model, messages=assistant_tail())
    with pytest.raises(ValueError, match="cannot continue from an assistant message"):
        await agent.continue_()
    assert recorder.events == []  # refused before any event
    assert model.requests == []
    assert not agent.state.is_running
    agent.follow_up("now")
    await agent.continue_()  # the agent is still usable
    check_grammar(recorder.events)
    assert len(model.requests) == 1


async def test_continue_refuses_an_empty_context() -> None:
    model = ScriptedModel(["unused"])
    agent, recorder = new_agent(model)
    with pytest.raises(ValueError, match="no messages"):
        await agent.continue_()
    assert recorder.events == []
    assert not agent.state.is_running
    with pytest.raises(ValueError, match="no messages"):
        await run_agent_loop_continue(
            AgentContext(), LoopConfig(model="m"), None, model, Recorder()
        )
    # agent_loop_continue raises at call time, before a task exists
    with pytest.raises(ValueError, match="no messages"):
        agent_loop_continue(AgentContext(), LoopConfig(model="m"), None, model)
    assert model.requests == []


async def test_run_agent_loop_continue_with_queue_hooks() -> None:
    model = ScriptedModel(["one", "two"])
    steering: list[Message] = []
    follow_ups: list[Message] = [UserMessage(content="later")]

    def drain(queue: list[Message]) -> list[Message]:
        items = list(queue)
        queue.clear()
        return items

    config = LoopConfig(
        model="m",
        get_steering_messages=lambda: drain(steering),
        get_follow_up_messages=lambda: drain(follow_ups),
    )
    context = AgentContext.of(messages=assistant_tail())
    recorder = Recorder()
    added = await run_agent_loop_continue(context, config, None, model, recorder)
    check_grammar(recorder.events)
    assert texts(added) == ["later", "one"]
    assert len(model.requests) == 1
    with pytest.raises(ValueError, match="nothing is queued"):
        await run_agent_loop_continue(context, config, None, model, Recorder())


async def test_continue_from_a_tool_result_tail() -> None:
    call = ToolCall(id="t1", function=FunctionCall(name="look", arguments="{}"))
    history: list[Message] = [
        UserMessage(content="look around"),
        AssistantMessage(tool_calls=(call,), stop_reason="tool_use"),
        ToolMessage(tool_call_id="t1", name="look", content="a tree"),
    ]
    model = ScriptedModel(["I see a tree"])
    agent, recorder = new_agent(model, messages=history)
    added = await agent.continue_()
    check_grammar(recorder.events)
    assert trace(recorder) == [
        "agent_start",
        "turn_start",
        "+assistant",
        "-assistant:I see a tree",
        "turn_end",
        "agent_end:completed",
    ]
    assert list(model.requests[0].messages) == history
    assert texts(added) == ["I see a tree"]


async def test_continue_after_an_error_reply_retries() -> None:
    """Agent.continue_ is documented to continue "after an error": the failed reply is
    not sent, so the transcript the model sees ends with the user's message."""
    model = ScriptedModel([Reply(error="overloaded"), "second try"])
    agent, recorder = new_agent(model)
    await agent.prompt("hello")
    assert agent.state.last_end_reason == "error"
    assert agent.state.messages[-1].stop_reason == "error"  # type: ignore[union-attr]
    check_grammar(recorder.events)
    retry = Recorder()
    agent.subscribe(retry)
    await agent.continue_()
    check_grammar(retry.events)
    assert texts(model.requests[1].messages) == ["hello"]
    assert agent.state.messages[-1].content == "second try"  # type: ignore[union-attr]


# -- prepare_next_turn / should_stop_after_turn --------------------------------------------


@tool
def step() -> str:
    """One step."""
    return "stepped"


def tool_turns(n: int, final: str = "done") -> list[Reply | str]:
    return [*(Reply(calls=[Call("step", id=f"s{i}")]) for i in range(n)), final]


async def test_prepare_next_turn_swaps_the_model_for_the_next_call_only() -> None:
    seen: list[TurnContext] = []

    def prepare(turn: TurnContext) -> TurnUpdate | None:
        seen.append(turn)
        return TurnUpdate(model="other", thinking_level="high") if len(seen) == 1 else None

    model = ScriptedModel(tool_turns(2))
    agent, recorder = new_agent(
        model, tools=[step], model="main", loop_options={"prepare_next_turn": prepare}
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert [r.model for r in model.requests] == ["main", "other", "main"]
    assert [r.thinking_level for r in model.requests] == ["off", "high", "off"]
    assert len(seen) == 2  # after each tool turn
    assert seen[0].message.tool_calls[0].id == "s0"
    assert [r.tool_call_id for r in seen[0].tool_results] == ["s0"]
    assert agent.state.model == "main"


async def test_prepare_next_turn_replaces_the_context_for_one_call_only() -> None:
    replaced = [UserMessage(content="just this")]
    calls = 0

    def prepare(turn: TurnContext) -> TurnUpdate | None:
        nonlocal calls
        calls += 1
        return TurnUpdate(messages=replaced) if calls == 1 else None

    model = ScriptedModel(tool_turns(2))
    agent, recorder = new_agent(model, tools=[step], loop_options={"prepare_next_turn": prepare})
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert list(model.requests[1].messages) == replaced
    assert roles(model.requests[2].messages) == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert roles(agent.state.messages) == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_should_stop_after_turn_ends_without_another_model_call() -> None:
    turns: list[TurnContext] = []

    def stop(turn: TurnContext) -> bool:
        turns.append(turn)
        return True

    model = ScriptedModel(tool_turns(1, final="never asked"))
    agent, recorder = new_agent(model, tools=[step], loop_options={"should_stop_after_turn": stop})
    added = await agent.prompt("go")
    check_grammar(recorder.events)
    assert model.remaining == 1
    assert len(model.requests) == 1
    assert trace(recorder)[-3:] == ["-tool:s0", "turn_end", "agent_end:stopped_by_hook"]
    assert roles(added) == ["user", "assistant", "tool"]
    assert len(turns) == 1
    # the transcript ends with a tool result: continue picks up from there
    await agent.continue_()
    check_each_run(recorder.events)
    assert agent.state.messages[-1].content == "never asked"  # type: ignore[union-attr]
    assert roles(model.requests[1].messages) == ["user", "assistant", "tool"]


# -- transform_context / convert_to_llm -----------------------------------------------------


async def test_transform_context_then_convert_to_llm_before_every_call() -> None:
    log: list[tuple[str, int]] = []

    async def transform(messages: Sequence[Message], signal: AbortSignal) -> Sequence[Message]:
        log.append(("transform", len(messages)))
        return messages

    def convert(messages: Sequence[Message]) -> Sequence[Message]:
        log.append(("convert", len(messages)))
        # e.g. tag what the model sees; the transcript is untouched
        return [
            m.model_copy(update={"content": f"[u] {m.content}"})
            if isinstance(m, UserMessage)
            else m
            for m in messages
        ]

    model = ScriptedModel(tool_turns(1))
    agent, recorder = new_agent(
        model,
        tools=[step],
        loop_options={"transform_context": transform, "convert_to_llm": convert},
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert log == [("transform", 1), ("convert", 1), ("transform", 3), ("convert", 3)]
    assert texts(model.requests[0].messages) == ["[u] go"]
    assert texts(agent.state.messages)[0] == "go"


async def test_an_invalid_convert_to_llm_result_becomes_an_error_message() -> None:
    def convert(messages: Sequence[Message]) -> Sequence[Message]:
        return [*messages, UserMessage(content="again")]  # two user messages in a row

    model = ScriptedModel(["unused"])
    agent, recorder = new_agent(model, loop_options={"convert_to_llm": convert})
    added = await agent.prompt("go")
    check_grammar(recorder.events)
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "error"
    failed = added[-1]
    assert isinstance(failed, AssistantMessage)
    assert failed.stop_reason == "error"
    assert failed.error_message is not None
    assert "index 1" in failed.error_message
    assert model.requests == []  # nothing was sent
    assert agent.state.error == failed.error_message


# -- Agent run rules ----------------------------------------------------------------------


async def test_prompt_while_running_raises_agent_busy_error() -> None:
    model = ScriptedModel(["slow answer", "second"], delay=0.01, chunk_size=2)
    agent, recorder = new_agent(model)
    task = asyncio.create_task(agent.prompt("first"))
    await asyncio.sleep(0.02)
    assert agent.state.is_running
    with pytest.raises(AgentBusyError, match="already running"):
        await agent.prompt("second")
    with pytest.raises(AgentBusyError):
        await agent.continue_()
    agent.follow_up("queued instead")  # the documented way
    await task
    check_grammar(recorder.events)
    assert texts(agent.state.messages) == ["first", "slow answer", "queued instead", "second"]


async def test_a_raising_subscriber_does_not_break_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(event: AgentEvent) -> None:
        raise RuntimeError("subscriber bug")

    async def broken_async(event: AgentEvent) -> None:
        await asyncio.sleep(0)
        raise ValueError("async subscriber bug")

    model = ScriptedModel(tool_turns(1))
    agent = Agent(stream_fn=model, tools=[step])
    agent.subscribe(broken)
    agent.subscribe(broken_async)
    recorder = Recorder()
    agent.subscribe(recorder)  # after the broken ones: still sees everything
    with caplog.at_level(logging.ERROR):
        assert await agent.achat("go") == "done"
    check_grammar(recorder.events)
    assert recorder.events[-1].reason == "completed"  # type: ignore[union-attr]
    failures = [r for r in caplog.records if "listener failed" in r.getMessage()]
    assert len(failures) == 2 * len(recorder.events)


async def test_unsubscribe_stops_delivery() -> None:
    agent = Agent(stream_fn=ScriptedModel(["a", "b"]))
    recorder = Recorder()
    unsubscribe = agent.subscribe(recorder)
    await agent.prompt("one")
    check_grammar(recorder.events)
    count = len(recorder.events)
    unsubscribe()
    unsubscribe()  # idempotent
    await agent.prompt("two")
    assert len(recorder.events) == count


async def test_wait_for_idle() -> None:
    model = ScriptedModel(["streamed answer"], delay=0.005, chunk_size=2)
    agent, recorder = new_agent(model)
    await agent.wait_for_idle()  # idle: returns at once
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.sleep(0)
    assert agent.state.is_running
    await asyncio.wait_for(agent.wait_for_idle(), 2)
    assert not agent.state.is_running
    assert agent.state.messages[-1].content == "streamed answer"  # type: ignore[union-attr]
    assert isinstance(recorder.events[-1], AgentEnd)
    await task
    check_grammar(recorder.events)


async def test_wait_for_idle_after_an_abort() -> None:
    model = ScriptedModel(["x" * 200], delay=0.005, chunk_size=1)
    agent, recorder = new_agent(model)
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.sleep(0.02)
    agent.abort()
    await asyncio.wait_for(agent.wait_for_idle(), 1)
    assert not agent.state.is_running
    await task
    check_grammar(recorder.events)
    assert agent.state.last_end_reason == "aborted"


async def test_run_agent_loop_emits_to_an_async_sink() -> None:
    events: list[AgentEvent] = []

    async def sink(event: AgentEvent) -> None:
        await asyncio.sleep(0)
        events.append(event)

    model = ScriptedModel(tool_turns(1))
    added = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext.of(tools=[step]),
        LoopConfig(model="m"),
        None,
        model,
        sink,
    )
    check_grammar(events)
    assert roles(added) == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_continue_with_queued_steering_respects_the_queue_mode(mode: str) -> None:
    model = ScriptedModel(["r1", "r2", "unused"])
    agent, recorder = new_agent(model, messages=assistant_tail(), steering_mode=mode)
    agent.steer("s1")
    agent.steer("s2")
    await agent.continue_()
    check_grammar(recorder.events)
    if mode == "one-at-a-time":  # each steering message gets its own model call
        assert [texts(r.messages) for r in model.requests] == [
            ["hi", "hello", "s1"],
            ["hi", "hello", "s1", "r1", "s2"],
        ]
    else:
        assert [texts(r.messages) for r in model.requests] == [["hi", "hello", "s1\n\ns2"]]
    assert agent.queued == ((), ())
