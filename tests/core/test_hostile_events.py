"""Events no tool or cancellation can disorder (issue 10, item 6).

* A tool that keeps calling its progress callback from a thread after it returned (or
  after the run was aborted, or after the run ended): no ``ToolExecutionUpdate`` reaches a
  sink after that call's ``ToolExecutionEnd`` or after ``AgentEnd`` — checked on the bare
  loop (``run_agent_loop`` with a sink) and through the ``Agent``.
* The task running a prompt cancelled while an async subscriber awaits an event, at every
  event of a script in turn: *each* subscriber (async ones before and after it, a sync one)
  sees a complete grammar, and the next prompt runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    Agent,
    AgentContext,
    AgentEvent,
    LoopConfig,
    ScriptedModel,
    Tool,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    ToolRegistry,
    ToolResult,
    UserMessage,
    run_agent_loop,
    tool,
    validate_transcript,
)
from mibyan_jupyter.core.fakes import Call, Reply


class Chatterbox:
    """Tools whose threads keep reporting progress until told to stop."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.sent = 0
        self.threads: list[threading.Thread] = []

    def spam(self, ctx: ToolContext) -> None:
        def run() -> None:
            while not self.stop.is_set():
                ctx.on_update(ToolResult(content=f"tick {self.sent}"))
                self.sent += 1
                time.sleep(0.0005)

        thread = threading.Thread(target=run, daemon=True)
        self.threads.append(thread)
        thread.start()

    def tools(self) -> list[Tool]:
        @tool(side_effects=False)
        def quick(ctx: ToolContext) -> str:
            """Return at once, leaving a thread that reports progress."""
            self.spam(ctx)
            time.sleep(0.01)  # some updates while the call runs
            return "returned"

        @tool(side_effects=False)
        async def quick_async(ctx: ToolContext) -> str:
            """The same from an async tool."""
            self.spam(ctx)
            await asyncio.sleep(0.01)
            return "returned"

        @tool(side_effects=False)
        async def stuck(ctx: ToolContext) -> str:
            """Report progress and never finish (until aborted)."""
            self.spam(ctx)
            await asyncio.sleep(30)
            return "never"

        return [quick, quick_async, stuck]

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(1)


def assert_no_late_updates(events: Sequence[AgentEvent]) -> None:
    ended: set[str] = set()
    for index, event in enumerate(events):
        if isinstance(event, ToolExecutionUpdate):
            assert event.call_id not in ended, f"update after the end of {event.call_id}"
        elif isinstance(event, ToolExecutionEnd):
            ended.add(event.call_id)
        elif event.type == "agent_end":
            assert index == len(events) - 1, "events after AgentEnd"


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_no_update_after_its_end_or_after_agent_end_on_the_bare_loop(mode: str) -> None:
    box = Chatterbox()
    calls = [Call("quick", {}), Call("quick_async", {})]
    model = ScriptedModel([Reply("", calls=calls), "done"])
    recorder = Recorder()
    context = AgentContext("", [], ToolRegistry(box.tools()))
    config = LoopConfig(model="demo", tool_execution=mode)  # type: ignore[arg-type]
    try:
        await run_agent_loop([UserMessage(content="go")], context, config, None, model, recorder)
        count = len(recorder.events)
        await asyncio.sleep(0.05)  # the threads go on reporting
        assert len(recorder.events) == count
    finally:
        box.close()
    assert box.sent > len(recorder.of(ToolExecutionUpdate))  # many were sent late, and dropped
    check_grammar(recorder.events)
    assert_no_late_updates(recorder.events)


async def test_no_update_after_an_abort_through_the_agent() -> None:
    box = Chatterbox()
    model = ScriptedModel([Reply("", calls=[Call("stuck", {}), Call("quick", {})]), "next"])
    agent = Agent(stream_fn=model, tools=box.tools())
    slow, recorder = Recorder(), Recorder()

    async def slow_on_updates(event: AgentEvent) -> None:
        """An async subscriber (a view) that takes its time over progress updates."""
        slow(event)
        await asyncio.sleep(0.02 if isinstance(event, ToolExecutionUpdate) else 0)

    def abort_soon(event: AgentEvent) -> None:
        recorder(event)
        if isinstance(event, ToolExecutionUpdate) and len(recorder.of(ToolExecutionUpdate)) == 3:
            agent.abort()

    agent.subscribe(slow_on_updates)
    agent.subscribe(abort_soon)
    try:
        await agent.prompt("go")
        count = len(recorder.events)
        await asyncio.sleep(0.05)
        assert len(recorder.events) == count
        await agent.prompt("again")  # late updates of the old calls during a new run
    finally:
        box.close()
    for events in (slow.events, recorder.events):
        check_each_run(events)
        for run in _runs(events):
            assert_no_late_updates(run)
    validate_transcript(agent.state.messages)


def _runs(events: Sequence[AgentEvent]) -> list[list[AgentEvent]]:
    runs: list[list[AgentEvent]] = [[]]
    for event in events:
        runs[-1].append(event)
        if event.type == "agent_end":
            runs.append([])
    return [run for run in runs if run]


@tool(side_effects=False)
async def pause() -> str:
    """A short awaited tool."""
    await asyncio.sleep(0)
    return "paused"


@tool(side_effects=False)
def plain() -> str:
    """A sync tool."""
    return "plain"


SCRIPT = [
    Reply("Let me look.", calls=[Call("pause", {}), Call("plain", {})]),
    Reply("Done.", calls=[]),
]


async def _run_cancelled_at(cancel_at: int) -> tuple[list[Recorder], Agent]:
    """Three subscribers (async, sync, async); the first cancels the task running the
    prompt when event ``cancel_at`` arrives and then awaits, so the cancellation lands
    inside its await."""
    agent = Agent(stream_fn=ScriptedModel([*SCRIPT, "After."]), tools=[pause, plain])
    first, second, third = Recorder(), Recorder(), Recorder()
    task: asyncio.Task[object] | None = None

    async def cancelling(event: AgentEvent) -> None:
        first(event)
        if len(first.events) == cancel_at and task is not None:
            task.cancel()
        await asyncio.sleep(0)

    async def awaiting(event: AgentEvent) -> None:
        third(event)
        await asyncio.sleep(0)

    agent.subscribe(cancelling)
    agent.subscribe(second)
    agent.subscribe(awaiting)
    task = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.gather(task, return_exceptions=True)
    return [first, second, third], agent


async def test_cancelled_while_an_async_subscriber_awaits_every_subscriber_stays_whole() -> None:
    total = len((await _run_cancelled_at(10_000))[0][0].events)
    assert total > 15
    problems = []
    for cancel_at in range(1, total + 1):
        recorders, agent = await _run_cancelled_at(cancel_at)
        for number, recorder in enumerate(recorders, start=1):
            try:
                check_grammar(recorder.events)
                assert [e.type for e in recorder.events] == [e.type for e in recorders[0].events], (
                    "subscribers saw different events"
                )
            except AssertionError as error:
                problems.append(f"cancel at {cancel_at}, subscriber {number}: {error}")
        validate_transcript(agent.state.messages)
        await agent.achat("next")  # the session goes on
        assert agent.state.last_end_reason == "completed", f"cancel at {cancel_at}"
    assert not problems, "\n".join(problems)
