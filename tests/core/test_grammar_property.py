"""The event grammar and the transcript invariants, as properties over random scripts.

Each example builds a random script for the scripted model (text, thinking, 0-4 tool calls
of assorted kinds, random stop reasons), random steering / follow-up messages queued from a
tool or from a subscriber, a random tool execution mode and turn budget, and optionally an
abort from a subscriber after k events. It runs the agent and checks:

* the event grammar (``support.check_grammar``);
* the transcript is sendable: its model view builds, and a next prompt could be sent;
* every sendable assistant message with tool calls is followed by exactly one result per
  call, in call order;
* ``AgentEnd.messages`` (and the return value of ``prompt``) are the messages added;
* every request the model received passed the strict alternation check.

Examples run on their own event loop (``asyncio.run``) so hypothesis drives a sync test.

The same checks then run deterministically with the task that runs ``prompt()`` cancelled
at every event of a fixed script in turn (the cancellation lands in an async subscriber),
and with an event sink that raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    Agent,
    AgentContext,
    AgentEnd,
    AgentEvent,
    AssistantMessage,
    BudgetLimits,
    LoopConfig,
    Message,
    ModelView,
    ScriptedModel,
    Tool,
    ToolMessage,
    TurnEnd,
    UserMessage,
    run_agent_loop,
    tool,
    validate_transcript,
)
from mibyan_jupyter.core.fakes import Call, Reply

CALL_KINDS = ("ok", "fail", "unknown", "bad_json", "slow", "steer", "follow", "interactive")
TEXT = st.text(alphabet="abc xyz.", max_size=24)


@dataclass(frozen=True)
class Scenario:
    replies: tuple[Reply, ...]
    fillers: int
    tool_execution: str
    max_turns: int | None
    steering_mode: str
    follow_up_mode: str
    chunk_size: int
    delay: float
    subscriber_actions: tuple[tuple[int, str], ...]
    """(event number, "steer" | "follow") pairs: queue a message when that event arrives."""
    abort_after: int | None


def _call(kind: str, n: int) -> Call:
    if kind == "ok":
        return Call("ok", {"x": n})
    if kind == "fail":
        return Call("fail", {"why": f"reason {n}"})
    if kind == "unknown":
        return Call("no_such_tool", {"x": n})
    if kind == "bad_json":
        return Call("ok", '{"x": ' if n % 2 else "{not json")
    if kind == "slow":
        return Call("slow", {"ms": n % 4})
    if kind == "steer":
        return Call("queue", {"kind": "steer", "text": f"steer from tool {n}"})
    if kind == "follow":
        return Call("queue", {"kind": "follow", "text": f"follow-up from tool {n}"})
    assert kind == "interactive"
    return Call("interactive", {})


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    kinds = draw(st.lists(st.sampled_from(CALL_KINDS), max_size=4))
    ending = draw(st.sampled_from([None, None, "stop", "length", "error"]))
    calls = tuple(_call(kind, draw(st.integers(0, 9))) for kind in kinds)
    return Reply(
        text=draw(TEXT),
        thinking=draw(st.one_of(st.just(""), TEXT)),
        calls=calls,
        stop_reason=ending if ending in ("stop", "length") else None,  # type: ignore[arg-type]
        error="the model failed" if ending == "error" else None,
        thinking_signature=draw(st.sampled_from([None, "sig"])),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    return Scenario(
        replies=tuple(draw(st.lists(replies(), min_size=1, max_size=5))),
        fillers=draw(st.integers(0, 3)),
        tool_execution=draw(st.sampled_from(["parallel", "sequential"])),
        max_turns=draw(st.sampled_from([None, None, 1, 2, 3, 5])),
        steering_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        follow_up_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        chunk_size=draw(st.sampled_from([0, 1, 3, 16])),
        delay=draw(st.sampled_from([0.0, 0.0, 0.0002])),
        subscriber_actions=tuple(
            draw(
                st.lists(
                    st.tuples(st.integers(0, 40), st.sampled_from(["steer", "follow"])),
                    max_size=3,
                )
            )
        ),
        abort_after=draw(st.one_of(st.none(), st.integers(1, 60))),
    )


@dataclass
class Harness:
    agent: Agent | None = None
    tool_events: list[str] = field(default_factory=list)

    def tools(self) -> list[Tool]:
        @tool(side_effects=False)
        def ok(x: int = 0) -> str:
            """Return x."""
            return f"ok {x}"

        @tool
        def fail(why: str = "") -> str:
            """Always fails."""
            raise RuntimeError(f"failed: {why}")

        @tool
        async def slow(ms: int = 0) -> str:
            """Sleep a little."""
            await asyncio.sleep(ms / 1000)
            return f"slept {ms}"

        @tool
        def queue(kind: str, text: str) -> str:
            """Queue a steering or follow-up message (runs in a worker thread)."""
            assert self.agent is not None
            if kind == "steer":
                self.agent.steer(text)
            else:
                self.agent.follow_up(text)
            return f"queued {kind}"

        @tool(sequential=True)
        def interactive() -> str:
            """A tool that forces its batch to run sequentially."""
            return "asked"

        return [ok, fail, slow, queue, interactive]


def _check_sendable(messages: Sequence[Message]) -> None:
    view = ModelView(messages)  # must not raise
    view.append(UserMessage(content="next"), len(messages))
    view.check_ready()  # a next prompt could be sent
    validate_transcript(view.messages, ready_for_model=True)
    for index, message in enumerate(messages):
        if not (isinstance(message, AssistantMessage) and message.tool_calls):
            continue
        following: list[str] = []
        for later in messages[index + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            following.append(later.tool_call_id)
        if message.sendable:
            assert following == [c.id for c in message.tool_calls], (
                f"message {index}: results {following} for calls "
                f"{[c.id for c in message.tool_calls]}"
            )
        else:
            assert following == [], f"aborted/failed message {index} has results {following}"


def _roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


def _check_run(
    events: Sequence[AgentEvent], before: int, agent: Agent, returned: list[Message] | None
) -> AgentEnd:
    ends = sum(isinstance(e, AgentEnd) for e in events)
    assert ends <= 1, f"{ends} AgentEnd events: {[e.type for e in events[-4:]]}"
    check_grammar(events)
    end = events[-1]
    assert isinstance(end, AgentEnd)
    added = agent.state.messages[before:]
    assert list(end.messages) == added, (
        f"AgentEnd.messages {_roles(end.messages)} != messages added to agent.state.messages "
        f"{_roles(added)}"
    )
    if returned is not None:  # None: the run was cancelled, so prompt() raised
        assert returned == added
    assert agent.state.last_end_reason == end.reason
    assert not agent.state.is_running
    assert agent.state.streaming_message is None
    assert not agent.state.pending_tool_calls
    _check_sendable(agent.state.messages)
    return end


async def _run(scenario: Scenario, cancel_at: int | None = None) -> list[AgentEvent]:
    """Run ``scenario``, then a second prompt, checking both; returns the events
    of the first run. With ``cancel_at``, the task running the first ``prompt()`` is
    cancelled from an (async) subscriber when that event arrives, so the cancellation
    lands while the event is being dispatched."""
    harness = Harness()
    model = ScriptedModel(
        [*scenario.replies, *["filler"] * scenario.fillers],
        chunk_size=scenario.chunk_size,
        delay=scenario.delay,
    )
    agent = Agent(
        stream_fn=model,
        tools=harness.tools(),
        tool_execution=scenario.tool_execution,  # type: ignore[arg-type]
        steering_mode=scenario.steering_mode,  # type: ignore[arg-type]
        follow_up_mode=scenario.follow_up_mode,  # type: ignore[arg-type]
        budget=BudgetLimits(max_turns=scenario.max_turns),
    )
    harness.agent = agent
    recorder = Recorder()
    agent.subscribe(recorder)
    actions = dict(scenario.subscriber_actions)
    run_task: asyncio.Future[list[Message]] | None = None

    async def actor(event: AgentEvent) -> None:
        count = len(recorder.events)
        kind = actions.get(count)
        if kind == "steer":
            agent.steer(f"steer from subscriber at {count}")
        elif kind == "follow":
            agent.follow_up(f"follow-up from subscriber at {count}")
        if scenario.abort_after is not None and count == scenario.abort_after:
            agent.abort()
        if cancel_at is not None and count == cancel_at and run_task is not None:
            run_task.cancel()
            await asyncio.sleep(0)

    unsubscribe_actor = agent.subscribe(actor)
    run_task = asyncio.ensure_future(agent.prompt("go"))
    (outcome,) = await asyncio.gather(run_task, return_exceptions=True)
    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
        raise outcome
    returned = None if isinstance(outcome, BaseException) else outcome
    end = _check_run(recorder.events, 0, agent, returned)
    first_events = list(recorder.events)
    if scenario.max_turns is not None and end.reason == "budget_exhausted":
        assert sum(isinstance(m, AssistantMessage) for m in end.messages) == scenario.max_turns + 1

    # The conversation goes on from whatever the first run left (an abort, queued messages,
    # a failed reply): the next run must be valid too.
    unsubscribe_actor()
    recorder2 = Recorder()
    agent.subscribe(recorder2)
    model.add(*["bye"] * 6)
    before = len(agent.state.messages)
    returned2 = await agent.prompt("and now?")
    _check_run(recorder2.events, before, agent, returned2)

    # Every request the model saw passed the strict check (nothing merged or dropped later).
    assert model.requests
    for number, request in enumerate(model.requests):
        try:
            validate_transcript(request.messages, ready_for_model=True)
        except ValueError as error:
            raise AssertionError(f"request {number} invalid: {error}") from error
    return first_events


@pytest.mark.slow  # a property run: in make test, not in the fast lane
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenarios())
def test_grammar_and_transcript_over_random_scripts(scenario: Scenario) -> None:
    events = asyncio.run(_run(scenario))
    end = events[-1]
    assert isinstance(end, AgentEnd)
    event(f"end reason: {end.reason}")  # see --hypothesis-show-statistics
    event(f"aborted during: {_abort_phase(events)}")


FIXED_SCRIPTS: dict[str, tuple[Reply, ...]] = {
    # a tool turn with two calls, then an answer
    "tools": (
        Reply(text="hm", calls=(Call("ok", {"x": 1}), Call("slow", {"ms": 1}))),
        Reply(text="done"),
    ),
    # the stream fails after streaming a tool call: an unsendable message with a call
    "error-with-call": (Reply(text="t", calls=(Call("ok", {"x": 1}),), error="boom"),),
}


def _fixed_scenario(tool_execution: str, script: str) -> Scenario:
    return Scenario(
        replies=FIXED_SCRIPTS[script],
        fillers=0,
        tool_execution=tool_execution,
        max_turns=None,
        steering_mode="one-at-a-time",
        follow_up_mode="one-at-a-time",
        chunk_size=4,
        delay=0.0,
        subscriber_actions=(),
        abort_after=None,
    )


@pytest.mark.parametrize("script", list(FIXED_SCRIPTS))
@pytest.mark.parametrize("tool_execution", ["parallel", "sequential"])
def test_task_cancelled_at_every_event(tool_execution: str, script: str) -> None:
    """Cancelling the task that runs ``prompt()`` is an abort too ("Agent.abort() (and
    cancellation of the task) ..."): whatever event is being dispatched to an async
    subscriber when the cancellation lands, the grammar closes (AgentEnd exactly once),
    AgentEnd.messages are the messages added, and the transcript stays sendable so the next
    prompt works. One clean run gives the number of events; then one run per event."""
    scenario = _fixed_scenario(tool_execution, script)
    clean = asyncio.run(_run(scenario))
    total = len(clean)
    problems: list[str] = []
    for cancel_at in range(1, total + 1):
        try:
            asyncio.run(_run(scenario, cancel_at=cancel_at))
        except (AssertionError, ValueError) as error:
            first_line = (str(error) or type(error).__name__).splitlines()[0]
            where = clean[cancel_at - 1].type
            problems.append(f"cancelled at event {cancel_at} ({where}): {first_line}")
    assert not problems, f"{len(problems)} of {total} cancellation points fail:\n" + "\n".join(
        problems
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(replies(), min_size=1, max_size=6), st.sampled_from(["parallel", "sequential"]))
def test_requests_are_valid_without_interference(script: list[Reply], tool_execution: str) -> None:
    """No queues, no aborts: every recorded request is a valid, ready transcript, and the
    last request holds every tool call of the run with its result."""

    async def run() -> None:
        harness = Harness()
        model = ScriptedModel([*script, "done"], chunk_size=4)
        agent = Agent(
            stream_fn=model,
            tools=harness.tools(),
            tool_execution=tool_execution,  # type: ignore[arg-type]
            budget=BudgetLimits(max_turns=None),
        )
        harness.agent = agent
        recorder = Recorder()
        agent.subscribe(recorder)
        returned = await agent.prompt("go")
        _check_run(recorder.events, 0, agent, returned)
        for request in model.requests:
            validate_transcript(request.messages, ready_for_model=True)
            assert request.messages[0] == agent.state.messages[0]
        # each request extends the previous one (the view only grows)
        for earlier, later in zip(model.requests, model.requests[1:], strict=False):
            assert list(later.messages[: len(earlier.messages)]) == list(earlier.messages)

    asyncio.run(run())


def _abort_phase(events: Sequence[AgentEvent]) -> str:
    """Where an aborted run stopped (for hypothesis' statistics)."""
    end = events[-1]
    if not isinstance(end, AgentEnd) or end.reason != "aborted":
        return "not aborted"
    aborted = [
        m for m in end.messages if isinstance(m, AssistantMessage) and m.stop_reason == "aborted"
    ]
    if aborted:
        return "stream (with partial calls)" if aborted[-1].tool_calls else "stream"
    if any(isinstance(m, ToolMessage) and "cancelled" in str(m.content) for m in end.messages):
        return "tool batch"
    return "between phases"


async def test_sink_failure_after_a_failed_reply_with_calls() -> None:
    """An exception in the event sink is closed by the loop (AgentEnd, re-raise); the
    transcript it leaves must stay sendable. Here the reply failed (stop reason ``error``)
    after streaming a tool call, and the sink raises on TurnEnd: that call must not get a
    synthetic result (the failed message is never sent, so its result would be an orphan),
    and nothing may be emitted outside a turn."""
    model = ScriptedModel([Reply(text="t", calls=[Call("ok", {"x": 1})], error="boom")])
    events: list[AgentEvent] = []

    def sink(event: AgentEvent) -> None:
        events.append(event)
        if isinstance(event, TurnEnd):
            raise RuntimeError("the sink broke")

    context = AgentContext.of(tools=Harness().tools())
    with pytest.raises(RuntimeError, match="the sink broke"):
        await run_agent_loop(
            [UserMessage(content="go")], context, LoopConfig(model="m"), None, model, sink
        )
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "error"
    _check_sendable(end.messages)
    check_grammar(events)
