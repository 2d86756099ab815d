"""Abort: ``Agent.abort()`` mid-stream, during a tool batch and during an approval; abort
from another thread; cancellation of the task running ``prompt()``; the ``agent_loop``
stream's ``aclose()``. Whatever stops the run, the partial assistant message is kept with
stop reason ``aborted``, every tool call gets a result, the events are closed and the next
request is valid."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentContext,
    AgentEnd,
    AgentEvent,
    ApprovalGate,
    ApprovalRequest,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Call,
    Decision,
    LoopConfig,
    Message,
    MessageEnd,
    MessageUpdate,
    Reply,
    ScriptedModel,
    Tool,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolMessage,
    ToolResult,
    TurnEnd,
    UserMessage,
    agent_loop,
    tool,
    validate_transcript,
)
from mibyan_jupyter.core.stream import TextDelta, ToolCallDelta
from mibyan_jupyter.core.transcript import check_history

LONG = "The quick brown fox jumps over the lazy dog, twice over."
CANCELLED_TEXT = "cancelled by the user"


# -- helpers ------------------------------------------------------------------------------


def abort_after_deltas(
    agent: Agent, n: int, kind: type = TextDelta
) -> Callable[[AgentEvent], None]:
    """A listener that aborts the agent when the ``n``-th delta of ``kind`` arrives."""
    seen = 0

    def listener(event: AgentEvent) -> None:
        nonlocal seen
        if isinstance(event, MessageUpdate) and isinstance(event.event, kind):
            seen += 1
            if seen == n:
                agent.abort()

    return listener


async def wait_until(predicate: Callable[[], bool], timeout: float = 2.0) -> None:  # noqa: ASYNC109 - a test helper
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.005)


def assert_sendable(messages: tuple[Message, ...] | list[Message]) -> None:
    """What a model may receive: valid alternation, no aborted/error reply, every call answered."""
    validate_transcript(messages, ready_for_model=True)
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert message.stop_reason not in ("aborted", "error"), message


def assert_one_result_per_call(messages: list[Message]) -> None:
    """Every tool call of a sendable assistant message has exactly one result, and no result
    is left without its call."""
    calls = [
        c.id
        for m in messages
        if isinstance(m, AssistantMessage) and m.sendable
        for c in m.tool_calls
    ]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results)


def last_end(recorder: Recorder) -> AgentEnd:
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    return end


def make_tools(started: dict[str, asyncio.Event]) -> list[Tool]:
    @tool
    async def fast(label: str = "fast") -> str:
        """Return at once."""
        return f"{label} done"

    @tool
    async def slow() -> str:
        """Sleep ten seconds."""
        started["slow"].set()
        await asyncio.sleep(10)
        return "slow done"

    return [fast, slow]


# -- abort mid-stream -----------------------------------------------------------------------


async def test_abort_mid_stream_keeps_the_partial_message_and_closes_events() -> None:
    model = ScriptedModel([LONG, "second answer"], delay=0.02, chunk_size=2)
    agent = Agent(stream_fn=model)
    recorder = Recorder()
    agent.subscribe(recorder)
    stop = agent.subscribe(abort_after_deltas(agent, 3))

    began = time.monotonic()
    added = await agent.prompt("first")
    assert time.monotonic() - began < 1.0
    check_grammar(recorder.events)

    assert recorder.types() == [
        "agent_start",
        "turn_start",
        "message_start",  # the prompt
        "message_end",
        "message_start",  # the partial reply
        "message_end",
        "turn_end",
        "agent_end",
    ]
    end = last_end(recorder)
    assert end.reason == "aborted"
    partial = agent.state.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert partial.content == LONG[:6]  # three deltas of two characters
    updates = recorder.of(MessageUpdate)
    assert updates[-1].message.content == partial.content
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert added == list(end.messages)
    assert added[-1] == partial
    message_ends = recorder.of(MessageEnd)
    assert message_ends[-1].message == partial
    turn_end = recorder.of(TurnEnd)[-1]
    assert turn_end.message == partial
    assert turn_end.tool_results == ()
    assert agent.state.last_end_reason == "aborted"
    assert not agent.state.is_running
    assert agent.state.streaming_message is None

    # The next run: the aborted reply is left out, the two user messages are merged.
    stop()
    second = Recorder()
    agent.subscribe(second)
    await agent.prompt("second")
    check_grammar(second.events)
    assert last_end(second).reason == "completed"
    request = model.requests[1]
    assert_sendable(request.messages)
    assert [m.role for m in request.messages] == ["user"]
    assert request.messages[0].content == "first\n\nsecond"
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.state.messages[-1].content == "second answer"  # type: ignore[union-attr]


async def test_abort_while_a_tool_call_streams_leaves_no_orphan_call() -> None:
    ran: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        ran.append(text)
        return text

    model = ScriptedModel(
        [Reply(text="calling", calls=[Call("echo", {"text": "a rather long argument"})]), "ok"],
        delay=0.02,
        chunk_size=2,
    )
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    agent.subscribe(recorder)
    stop = agent.subscribe(abort_after_deltas(agent, 3, ToolCallDelta))
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    assert not recorder.of(ToolExecutionStart)
    assert ran == []
    partial = agent.state.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert partial.content == "calling"
    assert len(partial.tool_calls) == 1  # the partial call is kept for display

    stop()
    await agent.prompt("never mind")
    request = model.requests[1]
    assert_sendable(request.messages)
    assert [m.role for m in request.messages] == ["user"]
    assert request.messages[0].content == "go\n\nnever mind"
    check_each_run(recorder.events)


async def test_a_transcript_with_an_aborted_tool_call_can_seed_a_new_agent() -> None:
    """The agent's own transcript after an abort mid tool call is accepted as history
    (``Agent(messages=...)``, Hermes' ``conversation_history``): the aborted reply is
    not sent, so its partial call needs no result."""

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    model = ScriptedModel(
        [Reply(calls=[Call("echo", {"text": "a rather long argument"})]), "ok"],
        delay=0.01,
        chunk_size=2,
    )
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    agent.subscribe(recorder)
    stop = agent.subscribe(abort_after_deltas(agent, 2, ToolCallDelta))
    await agent.prompt("go")
    stop()
    await agent.prompt("never mind")
    check_each_run(recorder.events)
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user", "assistant"]
    check_history(agent.state.messages)
    fork = Agent(stream_fn=ScriptedModel(["forked"]), messages=agent.state.messages)
    assert await fork.achat("and?") == "forked"
    result = await Agent(stream_fn=ScriptedModel(["again"])).arun_conversation(
        "and?", conversation_history=agent.state.messages
    )
    assert result["metadata"]["final_response"] == "again"


# -- abort during a tool batch ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_abort_during_an_async_tool_batch(mode: str) -> None:
    started: dict[str, asyncio.Event] = {"slow": asyncio.Event()}
    tools = make_tools(started)
    model = ScriptedModel(
        [
            Reply(
                calls=[
                    Call("fast", {"label": "one"}, id="c1"),
                    Call("slow", id="c2"),
                    Call("fast", {"label": "three"}, id="c3"),
                ]
            ),
            "after",
        ]
    )
    agent = Agent(stream_fn=model, tools=tools, tool_execution=mode)  # type: ignore[arg-type]
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started["slow"].wait(), 2)
    # c1 (and in parallel mode c3) finish at once; wait for their ends before aborting.
    finished = 2 if mode == "parallel" else 1
    await wait_until(lambda: len(recorder.of(ToolExecutionEnd)) == finished)
    began = time.monotonic()
    agent.abort()
    added = await asyncio.wait_for(task, 2)
    assert time.monotonic() - began < 1.0, "the abort waited for the tool's 10 s sleep"

    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    results = {m.tool_call_id: m for m in added if isinstance(m, ToolMessage)}
    assert list(results) == ["c1", "c2", "c3"]  # call order
    assert results["c1"].content == "one done"
    assert not results["c1"].is_error
    assert CANCELLED_TEXT in str(results["c2"].content)
    assert results["c2"].is_error
    if mode == "parallel":
        assert results["c3"].content == "three done"
    else:  # never started
        assert CANCELLED_TEXT in str(results["c3"].content)
    turn_end = recorder.of(TurnEnd)[-1]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["c1", "c2", "c3"]
    assert_one_result_per_call(agent.state.messages)
    assert agent.state.pending_tool_calls == set()
    assert model.remaining == 1  # no model call after the abort

    await agent.prompt("and now?")
    check_each_run(recorder.events)
    assert_sendable(model.requests[1].messages)
    assert [m.role for m in model.requests[1].messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "user",
    ]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_abort_stops_a_sync_tool_that_polls_the_signal(mode: str) -> None:
    started = threading.Event()
    exited = threading.Event()
    seen: list[str] = []

    @tool
    def crunch(ctx: ToolContext) -> str:
        """Work in small steps, watching the signal."""
        started.set()
        try:
            for _ in range(1000):  # 10 s unless aborted
                if ctx.signal.wait_sync(0.01):
                    seen.append("saw abort")
                    return "stopped early"
            return "finished"
        finally:
            exited.set()

    @tool
    def quick() -> str:
        """Return at once."""
        return "quick done"

    model = ScriptedModel([Reply(calls=[Call("quick", id="q"), Call("crunch", id="c")]), "after"])
    agent = Agent(stream_fn=model, tools=[quick, crunch], tool_execution=mode)  # type: ignore[arg-type]
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("go"))
    await wait_until(started.is_set)
    await wait_until(lambda: len(recorder.of(ToolExecutionEnd)) == 1)
    began = time.monotonic()
    agent.abort()
    added = await asyncio.wait_for(task, 2)
    assert time.monotonic() - began < 1.0
    await wait_until(exited.is_set)
    assert seen == ["saw abort"]

    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    results = [m for m in added if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == ["q", "c"]
    assert results[0].content == "quick done"
    # The thread's late answer is dropped: the call was cancelled.
    assert CANCELLED_TEXT in str(results[1].content)
    assert results[1].is_error
    assert_one_result_per_call(agent.state.messages)


async def test_a_sync_tool_ignoring_the_signal_does_not_delay_the_abort() -> None:
    exited = threading.Event()
    started = threading.Event()

    @tool
    def stubborn(ctx: ToolContext) -> str:
        """Sleep without looking at the signal, then report progress."""
        started.set()
        time.sleep(0.3)
        ctx.on_update(ToolResult("late"))
        exited.set()
        return "late result"

    model = ScriptedModel([Reply(calls=[Call("stubborn", id="s")])])
    agent = Agent(stream_fn=model, tools=[stubborn])
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("go"))
    await wait_until(started.is_set)
    began = time.monotonic()
    agent.abort()
    added = await asyncio.wait_for(task, 2)
    assert time.monotonic() - began < 0.2
    count = len(recorder.events)
    await wait_until(exited.is_set)
    await asyncio.sleep(0.05)
    assert len(recorder.events) == count, "events arrived after AgentEnd"
    check_grammar(recorder.events)
    result = added[-1]
    assert isinstance(result, ToolMessage)
    assert CANCELLED_TEXT in str(result.content)


async def test_abort_while_waiting_for_an_approval() -> None:
    asked: list[ApprovalRequest] = []

    async def never(request: ApprovalRequest, signal: AbortSignal) -> Decision:
        asked.append(request)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        raise AssertionError("must not run")

    model = ScriptedModel([Reply(calls=[Call("delete", {"path": "x"}, id="d1")]), "after"])
    agent = Agent(stream_fn=model, tools=[delete], approval=ApprovalGate(approver=never))
    recorder = Recorder()
    agent.subscribe(recorder)

    def on_request(event: AgentEvent) -> None:
        if isinstance(event, ApprovalRequested):
            agent.abort()

    agent.subscribe(on_request)
    added = await asyncio.wait_for(agent.prompt("delete x"), 2)
    check_grammar(recorder.events)
    assert len(asked) == 1
    assert last_end(recorder).reason == "aborted"
    resolved = recorder.of(ApprovalResolved)
    assert len(resolved) == 1
    assert not resolved[0].approved
    assert resolved[0].decided_by == "abort"
    result = added[-1]
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "d1"
    assert CANCELLED_TEXT in str(result.content)
    assert_one_result_per_call(agent.state.messages)


# -- cancelling the task ----------------------------------------------------------------------


async def test_cancelling_the_prompt_task_mid_stream() -> None:
    model = ScriptedModel([LONG, "later"], delay=0.02, chunk_size=2)
    agent = Agent(stream_fn=model)
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("first"))
    await wait_until(lambda: len(recorder.of(MessageUpdate)) >= 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    partial = agent.state.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert partial.content
    assert LONG.startswith(partial.content)
    assert not agent.state.is_running

    await agent.prompt("second")
    check_each_run(recorder.events)
    assert_sendable(model.requests[1].messages)
    assert agent.state.messages[-1].content == "later"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_cancelling_the_prompt_task_during_a_tool_batch(mode: str) -> None:
    started: dict[str, asyncio.Event] = {"slow": asyncio.Event()}
    model = ScriptedModel(
        [Reply(calls=[Call("fast", id="c1"), Call("slow", id="c2"), Call("fast", id="c3")]), "x"]
    )
    agent = Agent(stream_fn=model, tools=make_tools(started), tool_execution=mode)  # type: ignore[arg-type]
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started["slow"].wait(), 2)
    began = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - began < 1.0
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    results = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert CANCELLED_TEXT in str(results[1].content)
    assert_one_result_per_call(agent.state.messages)
    await agent.prompt("again")
    check_each_run(recorder.events)
    assert_sendable(model.requests[1].messages)


async def test_cancelling_while_an_async_subscriber_handles_the_assistant_message() -> None:
    """A store writer awaits its write on MessageEnd; Kernel > Interrupt lands there."""
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Take a note."""
        ran.append(text)
        return "noted"

    model = ScriptedModel([Reply(calls=[Call("note", {"text": "a"}, id="n1")]), "fine"])
    agent = Agent(stream_fn=model, tools=[note])
    recorder = Recorder()
    agent.subscribe(recorder)
    writing = asyncio.Event()

    async def store(event: AgentEvent) -> None:
        if isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            writing.set()
            await asyncio.sleep(0.2)

    unsubscribe = agent.subscribe(store)
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(writing.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    unsubscribe()
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    assert ran == []
    # The call the subscribers saw must have a result, in the agent's transcript too.
    assert_one_result_per_call(agent.state.messages)

    await agent.prompt("what happened?")
    check_each_run(recorder.events)
    assert_sendable(model.requests[-1].messages)
    assert agent.state.messages[-1].content == "fine"  # type: ignore[union-attr]


async def test_abort_from_an_async_subscriber_while_tool_results_are_delivered() -> None:
    """The Stop button pressed while the store writes a tool result: an abort, not a
    cancellation, so prompt() returns; each call keeps exactly one result."""
    model = ScriptedModel(
        [
            Reply(
                calls=[Call("fast", {"label": "a"}, id="a"), Call("fast", {"label": "b"}, id="b")]
            ),
            "after",
        ]
    )
    agent = Agent(stream_fn=model, tools=make_tools({"slow": asyncio.Event()}))
    recorder = Recorder()
    agent.subscribe(recorder)

    async def store(event: AgentEvent) -> None:
        if isinstance(event, MessageEnd) and isinstance(event.message, ToolMessage):
            if event.message.tool_call_id == "a":
                agent.abort()
            await asyncio.sleep(0.01)

    unsubscribe = agent.subscribe(store)
    added = await asyncio.wait_for(agent.prompt("go"), 2)
    unsubscribe()
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    assert [m.tool_call_id for m in added if isinstance(m, ToolMessage)] == ["a", "b"]
    assert_one_result_per_call(agent.state.messages)
    await agent.prompt("next")
    check_each_run(recorder.events)
    assert_sendable(model.requests[-1].messages)
    assert agent.state.messages[-1].content == "after"  # type: ignore[union-attr]


# -- abort from another thread ------------------------------------------------------------


async def test_abort_from_another_thread_mid_stream() -> None:
    model = ScriptedModel([LONG * 4], delay=0.01, chunk_size=1)
    agent = Agent(stream_fn=model)
    recorder = Recorder()
    agent.subscribe(recorder)
    timer = threading.Timer(0.05, agent.abort)
    began = time.monotonic()
    timer.start()
    try:
        await asyncio.wait_for(agent.prompt("go"), 2)
    finally:
        timer.cancel()
    assert time.monotonic() - began < 1.0  # the whole reply would take > 2 s
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    partial = agent.state.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert partial.content
    assert (LONG * 4).startswith(partial.content)
    assert len(partial.content) < len(LONG * 4)


async def test_abort_from_another_thread_during_an_async_tool() -> None:
    started: dict[str, asyncio.Event] = {"slow": asyncio.Event()}
    model = ScriptedModel([Reply(calls=[Call("slow", id="s")])])
    agent = Agent(stream_fn=model, tools=make_tools(started))
    recorder = Recorder()
    agent.subscribe(recorder)
    task = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started["slow"].wait(), 2)
    began = time.monotonic()
    timer = threading.Timer(0.01, agent.abort)
    timer.start()
    added = await asyncio.wait_for(task, 2)
    timer.join()
    assert time.monotonic() - began < 1.0
    check_grammar(recorder.events)
    assert last_end(recorder).reason == "aborted"
    assert CANCELLED_TEXT in str(added[-1].content)  # type: ignore[union-attr]


async def test_abort_when_idle_is_a_no_op() -> None:
    agent = Agent(stream_fn=ScriptedModel(["hi"]))
    recorder = Recorder()
    agent.subscribe(recorder)
    agent.abort()
    assert await agent.achat("hello") == "hi"
    check_grammar(recorder.events)
    assert agent.state.last_end_reason == "completed"


# -- the agent_loop stream ----------------------------------------------------------------


def loop_parts() -> tuple[AgentContext, LoopConfig]:
    return AgentContext(), LoopConfig(model="m")


async def test_agent_loop_stream_aclose_stops_the_run() -> None:
    model = ScriptedModel([LONG * 4], delay=0.01, chunk_size=1)
    context, config = loop_parts()
    signal = AbortSignal()
    stream = agent_loop([UserMessage(content="go")], context, config, signal, model)
    events: list[AgentEvent] = []
    began = time.monotonic()
    async for event in stream:
        events.append(event)
        if sum(isinstance(e, MessageUpdate) for e in events) == 3:
            await stream.aclose()
    # the rest of the events (up to AgentEnd) were still delivered, then the iteration ended
    assert time.monotonic() - began < 1.0
    check_grammar(events)
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "aborted"
    partial = end.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert signal.aborted
    with pytest.raises(asyncio.CancelledError):
        await stream.result()


async def test_agent_loop_stream_with_signal_abort() -> None:
    model = ScriptedModel([LONG], delay=0.01, chunk_size=2)
    context, config = loop_parts()
    signal = AbortSignal()
    stream = agent_loop([UserMessage(content="go")], context, config, signal, model)
    events: list[AgentEvent] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, MessageUpdate) and event.message.content == LONG[:4]:
            signal.abort("stop now")
    check_grammar(events)
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "aborted"
    added = await stream.result()
    assert list(end.messages) == added
    partial = added[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.stop_reason == "aborted"
    assert partial.content == LONG[:4]
    assert partial.error_message == "stop now"
    assert context.messages == added  # the loop appends to context.messages in place


async def test_agent_loop_stream_leaving_early_does_not_stop_the_run() -> None:
    model = ScriptedModel(["all of it"], delay=0.001, chunk_size=2)
    context, config = loop_parts()
    stream = agent_loop([UserMessage(content="go")], context, config, None, model)
    events: list[AgentEvent] = []
    async for event in stream:
        events.append(event)
        break
    added = await asyncio.wait_for(stream.result(), 2)
    assert added[-1].content == "all of it"  # type: ignore[union-attr]
    events += [event async for event in stream]  # the rest was kept for a later reader
    check_grammar(events)


async def test_agent_loop_stream_aclose_before_the_first_event_ends_the_iteration() -> None:
    model = ScriptedModel(["never"])
    context, config = loop_parts()
    stream = agent_loop([UserMessage(content="go")], context, config, None, model)
    await stream.aclose()

    async def drain() -> list[AgentEvent]:
        return [event async for event in stream]

    events = await asyncio.wait_for(drain(), 0.5)  # must not hang
    if events:
        check_grammar(events)
    assert model.requests == []
