"""The budget gate (core/budget_gate.py): reservations before each call, clamped
max_tokens with a floor, concurrent consumers, child gates sharing a parent's cap, and the
loop's pause before the summary call ("continue" raises the limit, the same run goes on)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    Agent,
    AgentEnd,
    AgentStart,
    AssistantMessage,
    BudgetLimits,
    Call,
    Reply,
    ScriptedModel,
    Usage,
    UserMessage,
    tool,
)
from mibyan_jupyter.core.budget_gate import (
    FLOOR_TOKENS,
    BudgetGate,
    BudgetRefused,
    BudgetStop,
    ModelPrice,
    Spend,
)
from mibyan_jupyter.core.messages import content_text

PRICE = ModelPrice(input=1_000.0, output=10_000.0)
"""$0.001 an input token, $0.01 an output token."""


@tool
def step(n: int = 0) -> str:
    """One step of work."""
    return f"step {n} done"


def step_reply(i: int, usage: Usage | None = None) -> Reply:
    return Reply(text=f"working {i}", calls=[Call("step", {"n": i}, id=f"s{i}")], usage=usage)


# -- the gate alone ---------------------------------------------------------------------


def test_a_reservation_clamps_max_tokens_to_what_the_cap_pays_for() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=10.0))
    held = gate.reserve(1_000, 4_096, PRICE)  # $1 of input leaves $9: 900 output tokens
    assert held.max_tokens == 900
    assert held.spend.cost == pytest.approx(10.0)
    assert gate.remaining("cost") == pytest.approx(0.0)
    gate.settle(held, Usage(input=1_000, output=100, cost=2.0))
    assert gate.remaining("cost") == pytest.approx(8.0)  # what was not used came back
    assert gate.tracker.turns == 1


def test_below_the_floor_the_call_is_refused_and_nothing_is_held() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=1.0))
    with pytest.raises(BudgetRefused) as refused:
        gate.reserve(100, 4_096, PRICE)  # $0.10 of input, $0.90 buys 90 < 256 tokens
    assert refused.value.name == "cost"
    assert gate.reserved == Spend()
    small = gate.reserve(100, 50, PRICE)  # a call that asks for less than the floor
    assert small.max_tokens == 50
    assert FLOOR_TOKENS == 256


def test_a_kept_back_summary_is_left_unspent() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_output_tokens=2_000))
    keep = Spend(output_tokens=1_000)
    assert gate.reserve(10, 4_096, None, keep_back=keep).max_tokens == 1_000
    with pytest.raises(BudgetRefused):
        gate.reserve(10, 4_096, None, keep_back=keep)
    assert gate.reserve(10, 1_000, None, turns=0).max_tokens == 1_000  # the summary fits


def test_concurrent_consumers_cannot_each_spend_the_remainder() -> None:
    """Eight threads reserve at once from an $11 cap, each wanting a $4 call: the cap holds
    them to two whole calls and one clamped to the rest, and everyone else is refused."""
    gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=11.0))
    start = threading.Barrier(8)
    granted: list[float] = []
    refused: list[str] = []

    def consumer() -> None:
        start.wait()
        try:
            held = gate.reserve(0, 400, PRICE, turns=0)  # 400 tokens = $4
            granted.append(held.spend.cost)
        except BudgetRefused as error:
            refused.append(error.name)

    threads = [threading.Thread(target=consumer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) <= 11.0 + 1e-9
    assert sorted(granted) == pytest.approx([3.0, 4.0, 4.0])  # the third clamped to 300
    assert len(refused) == 5
    assert gate.remaining("cost") == pytest.approx(0.0)


async def test_concurrent_async_calls_reserve_before_they_run() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_output_tokens=1_000))

    async def call() -> int | None:
        try:
            held = gate.reserve(0, 400, None, turns=0)
        except BudgetRefused:
            return None
        await asyncio.sleep(0.01)  # the call runs while the others reserve
        gate.settle(held, Usage(output=held.max_tokens or 0), turn=False)
        return held.max_tokens

    results = await asyncio.gather(*(call() for _ in range(6)))
    assert sorted(r for r in results if r is not None) == [400, 400]  # 200 left < floor
    assert gate.tracker.output_tokens <= 1_000


def test_a_child_shares_its_parents_cost_cap_and_has_its_own_turns() -> None:
    parent = BudgetGate(BudgetLimits(max_turns=10, max_cost=10.0))
    child = parent.child(BudgetLimits(max_turns=1))
    held = child.reserve(0, 300, PRICE)  # $3, held by both
    assert parent.remaining("cost") == pytest.approx(7.0)
    child.settle(held, Usage(output=300, cost=3.0))
    assert parent.tracker.cost == pytest.approx(3.0)
    assert parent.tracker.turns == 0  # a child's turns are its own
    with pytest.raises(BudgetRefused) as refused:
        child.reserve(0, 300, PRICE)
    assert refused.value.name == "turns"
    big = parent.reserve(0, 4_096, PRICE)
    assert big.max_tokens == 700  # the parent pays only for what the child left
    with pytest.raises(BudgetRefused):
        parent.child(BudgetLimits(max_turns=None)).reserve(0, 300, PRICE)


def test_raise_limit_adds_the_step_of_the_first_limit() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=3, max_cost=0.5))
    assert gate.step("cost") == 0.5
    gate.raise_limit("cost", gate.step("cost"))
    gate.raise_limit("turns", gate.step("turns"))
    assert gate.limits.max_cost == pytest.approx(1.0)
    assert gate.limits.max_turns == 6
    assert gate.step("cost") == 0.5  # the step stays the cell's own limit


def test_an_unknown_price_under_a_cost_cap_is_flagged() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=1.0))
    held = gate.reserve(100, 500, None)
    assert gate.unknown_price
    gate.settle(held, Usage(input=100, output=500, cost=None))
    assert gate.tracker.unknown_cost
    assert gate.tracker.snapshot().budgets[-1].unknown


# -- the gate in the loop -----------------------------------------------------------------


async def test_continue_raises_the_limit_and_the_same_run_goes_on() -> None:
    asked: list[BudgetStop] = []
    answers = iter(["continue", "summarize"])

    def on_budget_exhausted(stop: BudgetStop) -> str:
        asked.append(stop)
        return next(answers)

    model = ScriptedModel([step_reply(0), step_reply(1), "Summary."])
    agent = Agent(
        stream_fn=model,
        tools=[step],
        budget=BudgetLimits(max_turns=1),
        loop_options={"on_budget_exhausted": on_budget_exhausted},
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert len(recorder.of(AgentStart)) == 1  # one run, paused and resumed
    assert [s.name for s in asked] == ["turns", "turns"]
    assert asked[0].step == 1
    assert "1 of 1" in asked[0].text
    assert "2 of 2" in asked[1].text
    assert len(model.requests) == 3  # two turns, then the summary
    assert model.requests[-1].tools == ()
    (end,) = recorder.of(AgentEnd)
    assert end.reason == "budget_exhausted"
    assert agent.state.messages[-1].content == "Summary."  # type: ignore[union-attr]


async def test_a_failing_hook_summarizes() -> None:
    def broken(stop: BudgetStop) -> str:
        raise RuntimeError("no front end")

    model = ScriptedModel([step_reply(0), "Summary."])
    agent = Agent(
        stream_fn=model,
        tools=[step],
        budget=BudgetLimits(max_turns=1),
        loop_options={"on_budget_exhausted": broken},
    )
    await agent.prompt("go")
    assert agent.state.last_end_reason == "budget_exhausted"
    assert len(model.requests) == 2


async def test_when_not_even_the_summary_fits_nothing_is_sent_and_one_line_says_so() -> None:
    model = ScriptedModel(["never sent"])
    agent = Agent(
        stream_fn=model,
        tools=[step],
        budget=BudgetLimits(max_turns=None, max_cost=0.001),  # one input token's worth
        loop_options={"prices": lambda _m: PRICE},
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_grammar(recorder.events)
    assert model.requests == []
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "error"
    assert final.error_message is not None
    assert "cannot pay even for a short summary" in final.error_message
    assert agent.state.last_end_reason == "budget_exhausted"
    assert not any(
        isinstance(m, UserMessage) and "[budget]" in content_text(m.content)
        for m in agent.state.messages
    )


async def test_a_shared_gate_spans_runs_and_a_compaction_summary_is_reserved() -> None:
    """A gate given in the loop options is the one every run reserves from (a cell's
    flush and later runs share it)."""
    gate = BudgetGate(BudgetLimits(max_turns=None, max_output_tokens=5_000))
    model = ScriptedModel(
        [Reply(text="a", usage=Usage(output=1_000)), Reply(text="b", usage=Usage(output=1_000))]
    )
    agent = Agent(stream_fn=model, loop_options={"budget_gate": gate})
    await agent.prompt("one")
    await agent.prompt("two")
    assert gate.tracker.output_tokens == 2_000
    assert gate.reserved == Spend()  # nothing stays held after a call
    # each request was clamped to what was left beside the summary's room
    first, second = (r.max_tokens or 0 for r in model.requests)
    assert first <= 5_000 - 1_024
    assert first - second == 1_000
