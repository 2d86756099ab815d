"""Budgets: turns, tokens and cost. When one is used up the loop makes exactly one final
call without tools (explicit max_tokens, tool_choice "none") asking for a summary, and
ends with a non-empty final message and reason ``budget_exhausted``. The instruction is a
note on that request (a NoteNotice), never a message of the transcript."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    CHILD_MAX_TURNS,
    DEFAULT_MAX_TURNS,
    Agent,
    AgentEnd,
    AssistantMessage,
    BudgetLimits,
    BudgetUpdated,
    Call,
    LoopConfig,
    MessageEnd,
    Reply,
    ScriptedModel,
    ToolExecutionStart,
    Usage,
    UserMessage,
    tool,
    validate_transcript,
)
from mibyan_jupyter.core.budget import BudgetTracker
from mibyan_jupyter.core.budget_gate import ModelPrice
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.core.notices import NoteNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest

# -- helpers ------------------------------------------------------------------------------


@tool
def step(n: int = 0) -> str:
    """One step of work."""
    return f"step {n} done"


def step_reply(i: int, usage: Usage | None = None) -> Reply:
    return Reply(text=f"working {i}", calls=[Call("step", {"n": i}, id=f"s{i}")], usage=usage)


def budget_agent(
    replies: list[Reply | str], budget: BudgetLimits, **loop_options: object
) -> tuple[Agent, ScriptedModel, Recorder]:
    model = ScriptedModel(replies)
    agent = Agent(stream_fn=model, tools=[step], budget=budget, loop_options=dict(loop_options))
    recorder = Recorder()
    agent.subscribe(recorder)
    return agent, model, recorder


def end_of(recorder: Recorder) -> AgentEnd:
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    return end


def final_message(recorder: Recorder) -> AssistantMessage:
    message = end_of(recorder).messages[-1]
    assert isinstance(message, AssistantMessage)
    return message


def assert_summary_request(
    model: ScriptedModel | list[ModelRequest], index: int, max_tokens: int
) -> None:
    requests = model if isinstance(model, list) else model.requests
    request = requests[index]
    assert request.tools == ()
    assert request.tool_choice == "none"
    # asked for max_tokens, clamped to what the budget has left (never below the floor)
    assert request.max_tokens is not None
    assert min(256, max_tokens) <= request.max_tokens <= max_tokens
    (note,) = request.notes
    assert "summary" in note
    for message in request.messages:  # the instruction is no "You" message
        assert not (
            isinstance(message, UserMessage) and "[budget]" in content_text(message.content)
        )
    validate_transcript(request.messages, ready_for_model=True)
    for earlier in requests[:index]:
        assert earlier.tools != ()
        assert earlier.tool_choice == "auto"


# -- the turn budget ------------------------------------------------------------------------


@pytest.mark.parametrize("max_turns", [1, 2, 4])
async def test_max_turns_makes_exactly_one_summary_call(max_turns: int) -> None:
    replies: list[Reply | str] = [step_reply(i) for i in range(10)]
    replies.insert(max_turns, "Summary: I did the steps.")
    agent, model, recorder = budget_agent(replies, BudgetLimits(max_turns=max_turns))
    added = await agent.prompt("do many steps")
    check_grammar(recorder.events)
    assert len(model.requests) == max_turns + 1
    assert model.remaining == len(replies) - (max_turns + 1)
    assert_summary_request(model, max_turns, LoopConfig.summary_max_tokens)
    assert LoopConfig.summary_max_tokens > 0
    (note,) = model.requests[max_turns].notes
    assert "turns" in note
    assert f"{max_turns} of {max_turns}" in note
    assert "Do not call any tools" in note
    end = end_of(recorder)
    assert end.reason == "budget_exhausted"
    final = final_message(recorder)
    assert final.content == "Summary: I did the steps."
    assert final.tool_calls == ()
    assert added[-1] == final
    assert agent.state.messages[-1] == final
    assert agent.state.last_end_reason == "budget_exhausted"
    assert len(recorder.of(ToolExecutionStart)) == max_turns
    # the summary turn: the note (a notice, not a message), the summary, then the end
    assert recorder.types()[-7:] == [
        "turn_end",
        "turn_start",
        "notes",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert not any(
        isinstance(m, UserMessage) and "[budget]" in content_text(m.content)
        for m in agent.state.messages
    )


async def test_summary_max_tokens_is_configurable() -> None:
    agent, model, recorder = budget_agent(
        [step_reply(0), "summary"], BudgetLimits(max_turns=1), summary_max_tokens=77
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert len(model.requests) == 2
    assert_summary_request(model, 1, 77)


async def test_no_summary_when_the_model_finishes_within_the_budget() -> None:
    agent, model, recorder = budget_agent([step_reply(0), "all done"], BudgetLimits(max_turns=2))
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert end_of(recorder).reason == "completed"
    assert len(model.requests) == 2
    assert final_message(recorder).content == "all done"


async def test_an_empty_summary_still_gives_a_non_empty_final_message() -> None:
    agent, model, recorder = budget_agent(
        [step_reply(0), Reply(text=""), "next answer"], BudgetLimits(max_turns=1)
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert len(model.requests) == 2
    assert end_of(recorder).reason == "budget_exhausted"
    final = final_message(recorder)
    assert final.content
    assert final.content.strip()
    assert final.tool_calls == ()
    # the MessageEnd carries the same, non-empty message
    assert recorder.of(MessageEnd)[-1].message == final
    # the transcript stays sendable
    await agent.prompt("go on")
    check_each_run(recorder.events)
    validate_transcript(model.requests[-1].messages, ready_for_model=True)


async def test_a_summary_that_calls_tools_is_reduced_to_text() -> None:
    agent, model, recorder = budget_agent(
        [
            step_reply(0),
            Reply(text="Here is where I am.", calls=[Call("step", {"n": 99}, id="bad")]),
            "next answer",
        ],
        BudgetLimits(max_turns=1),
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert len(model.requests) == 2
    final = final_message(recorder)
    assert final.content == "Here is where I am."
    assert final.tool_calls == ()
    assert [e.call_id for e in recorder.of(ToolExecutionStart)] == ["s0"]  # "bad" never ran
    await agent.prompt("go on")
    check_each_run(recorder.events)
    assert agent.state.messages[-1].content == "next answer"  # type: ignore[union-attr]
    validate_transcript(model.requests[-1].messages, ready_for_model=True)


async def test_a_summary_with_only_tool_calls_gets_a_fallback_text() -> None:
    agent, _, recorder = budget_agent(
        [step_reply(0), Reply(calls=[Call("step", id="bad")])], BudgetLimits(max_turns=1)
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    final = final_message(recorder)
    assert final.content
    assert "budget" in final.content
    assert final.tool_calls == ()


async def test_a_failed_summary_call_still_ends_with_text() -> None:
    agent, _, recorder = budget_agent(
        [step_reply(0), Reply(error="provider down")], BudgetLimits(max_turns=1)
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert end_of(recorder).reason == "budget_exhausted"
    final = final_message(recorder)
    assert final.content
    assert "provider down" in final.content


# -- token and cost budgets -----------------------------------------------------------------

PRICE = ModelPrice(input=100.0, output=100.0)
"""$0.0001 a token, so 100 tokens cost $0.01."""


@pytest.mark.parametrize(
    ("limits", "usage", "name", "used"),
    [
        (
            BudgetLimits(max_turns=None, max_total_tokens=4000),
            Usage(input=100, output=200),
            "total tokens",
            lambda s: s["total_tokens"],
        ),
        (
            BudgetLimits(max_turns=None, max_input_tokens=1500),
            Usage(input=300, output=1),
            "input tokens",
            lambda s: s["input_tokens"],
        ),
        (
            BudgetLimits(max_turns=None, max_output_tokens=2000),
            Usage(input=1, output=200),
            "output tokens",
            lambda s: s["output_tokens"],
        ),
        (
            BudgetLimits(max_turns=None, max_input_tokens=1500),
            Usage(input=60, cache_read=200, cache_write=40),
            "input tokens",
            lambda s: s["input_tokens"],
        ),
        (
            BudgetLimits(max_turns=None, max_cost=0.15),
            Usage(input=10, output=90, cost=0.01),
            "cost",
            lambda s: s["cost"],
        ),
    ],
)
async def test_token_and_cost_budgets_stop_before_the_cap_and_summarize_inside_it(
    limits: BudgetLimits, usage: Usage, name: str, used: Any
) -> None:
    """The model here keeps within each request's max_tokens (a real one must): then the
    run stops when the next call's worst case no longer fits beside the kept-back summary,
    and the summary is paid for inside the cap, never over it."""
    replies: list[Reply | str] = [step_reply(i, usage) for i in range(40)]
    model = ScriptedModel(replies)
    summary_first = ScriptedSummary(model, Reply(text="summary", usage=usage))
    agent = Agent(
        stream_fn=summary_first,
        tools=[step],
        budget=limits,
        loop_options={"prices": lambda _model: PRICE},
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_grammar(recorder.events)
    requests = summary_first.requests
    assert len(requests) >= 3  # several calls before the limit
    assert_summary_request(requests, len(requests) - 1, LoopConfig.summary_max_tokens)
    (note,) = requests[-1].notes
    assert name in note
    assert end_of(recorder).reason == "budget_exhausted"
    assert final_message(recorder).content == "summary"
    status = {b.name: b.used for b in recorder.of(BudgetUpdated)[-1].budgets}
    limit = {b.name: b.limit for b in recorder.of(BudgetUpdated)[-1].budgets}
    key = name.replace(" ", "_")
    assert used(status) <= limit[key]  # the summary included: the cap is never overshot
    if name != "input tokens":  # an input cap does not bound a reply
        for request in requests:  # every call named what it may spend, at least the floor
            assert request.max_tokens is not None
            assert request.max_tokens >= 256


class ScriptedSummary:
    """The scripted model, but a tool-less request gets ``summary`` (the point where the
    gate stops the run depends on its estimate, not on a count fixed by the test)."""

    def __init__(self, model: ScriptedModel, summary: Reply) -> None:
        self.model = model
        self.summary = ScriptedModel([summary])
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest, signal: AbortSignal) -> Any:
        self.requests.append(replace(request, messages=list(request.messages)))
        return (self.summary if request.tools == () else self.model)(request, signal)


# -- BudgetUpdated ------------------------------------------------------------------------


async def test_budget_updated_after_each_response() -> None:
    usage = Usage(input=100, output=10, cache_read=5, cost=0.01)
    limits = BudgetLimits(
        max_turns=2,
        max_input_tokens=10_000,
        max_output_tokens=1_000,
        max_total_tokens=20_000,
        max_cost=1.0,
    )
    agent, model, recorder = budget_agent(
        [step_reply(0, usage), step_reply(1, usage), Reply(text="sum", usage=usage)], limits
    )
    await agent.prompt("go")
    check_grammar(recorder.events)
    updates = recorder.of(BudgetUpdated)
    assert len(updates) == len(model.requests) == 3
    for n, update in enumerate(updates, start=1):
        status = {b.name: (b.used, b.limit) for b in update.budgets}
        assert status == {
            "turns": (n, 2),
            "input_tokens": (105 * n, 10_000),
            "output_tokens": (10 * n, 1_000),
            "total_tokens": (115 * n, 20_000),
            "cost": (pytest.approx(0.01 * n), 1.0),
        }
    # each one right after the assistant message it counts
    events = recorder.events
    for update in updates:
        before = events[events.index(update) - 1]
        assert isinstance(before, MessageEnd)
        assert isinstance(before.message, AssistantMessage)


async def test_budget_updated_shows_unlimited_budgets_as_none() -> None:
    agent, _, recorder = budget_agent(["hi"], BudgetLimits())
    await agent.prompt("go")
    check_grammar(recorder.events)
    (update,) = recorder.of(BudgetUpdated)
    status = {b.name: b.limit for b in update.budgets}
    assert status == {
        "turns": DEFAULT_MAX_TURNS,
        "input_tokens": None,
        "output_tokens": None,
        "total_tokens": None,
        "cost": None,
    }


async def test_unknown_cost_with_a_cost_budget_warns_and_does_not_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    usage = Usage(input=10, output=5, cost=None)
    agent, model, recorder = budget_agent(
        [step_reply(0, usage), step_reply(1, usage), Reply(text="done", usage=usage)],
        BudgetLimits(max_turns=None, max_cost=0.000001),
    )
    with caplog.at_level(logging.WARNING, logger="mibyan_jupyter.core.budget"):
        await agent.prompt("go")
    check_grammar(recorder.events)
    assert end_of(recorder).reason == "completed"
    assert len(model.requests) == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per run, not per call
    assert "cost" in warnings[0].getMessage()
    costs = [{b.name: b.used for b in u.budgets}["cost"] for u in recorder.of(BudgetUpdated)]
    assert costs == [0.0, 0.0, 0.0]
    # said once, as a notice the view shows, and the cost is marked unknown
    told = [n for n in recorder.of(NoteNotice) if "price" in " ".join(n.notes)]
    assert len(told) == 1
    assert "unknown" in told[0].notes[0]
    for update in recorder.of(BudgetUpdated):
        (cost,) = [b for b in update.budgets if b.name == "cost"]
        assert cost.unknown


async def test_unknown_cost_without_a_cost_budget_is_silent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent, _, recorder = budget_agent(
        [Reply(text="x", usage=Usage(input=10, output=5, cost=None))], BudgetLimits()
    )
    with caplog.at_level(logging.WARNING):
        await agent.prompt("go")
    check_grammar(recorder.events)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- BudgetLimits ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    ["max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost"],
)
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_limits_are_rejected(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        BudgetLimits(**{field: value})  # type: ignore[arg-type]


def test_limits_defaults_and_child() -> None:
    assert DEFAULT_MAX_TURNS == 500
    assert CHILD_MAX_TURNS == 50
    default = BudgetLimits()
    assert default.max_turns == 500
    assert default.max_cost is None
    assert default.max_total_tokens is None
    child = BudgetLimits.for_child()
    assert child.max_turns == 50
    assert BudgetLimits(max_turns=None).max_turns is None
    assert BudgetLimits(max_cost=0.5).max_cost == 0.5
    assert Agent(stream_fn=ScriptedModel()).budget.max_turns == 500


def test_tracker_reports_the_first_exhausted_budget() -> None:
    tracker = BudgetTracker(BudgetLimits(max_turns=3, max_output_tokens=10))
    assert tracker.exhausted() is None
    tracker.record(Usage(input=1, output=4, cost=0.0))
    assert tracker.exhausted() is None
    tracker.record(Usage(input=1, output=6, cost=0.0))
    assert tracker.exhausted() == "output_tokens"
    tracker.record(Usage())
    assert tracker.exhausted() == "turns"  # checked first
    assert tracker.describe("turns").startswith("turns")
    assert "3 of 3" in tracker.describe("turns")
