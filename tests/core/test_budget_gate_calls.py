"""Every model call goes through the budget gate, not only the loop's turns: a
compaction's summary (in the loop and ``agent.compact()`` with a shared gate) and the
memory flush's call are reserved before they are sent, counted after, and not sent at all
when the budget cannot pay for them (docs/architecture.md, "Budgets")."""

from __future__ import annotations

import pytest

from mibyan_jupyter.core import Agent, AssistantMessage, BudgetLimits, UserMessage
from mibyan_jupyter.core.budget_gate import BudgetGate, BudgetRefused, ModelPrice, Spend
from mibyan_jupyter.core.compaction import CompactionSettings
from mibyan_jupyter.core.messages import Message, Usage
from mibyan_jupyter.core.notices import CompactionNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest
from mibyan_jupyter.memory.flush import FLUSH_MAX_TOKENS, flush_call

WORDS = "lorem ipsum dolor sit amet " * 40
PRICE = ModelPrice(input=100.0, output=100.0)


class Model:
    """Summaries (tool-less requests) and answers, each using what it is told."""

    def __init__(self, usage: Usage) -> None:
        self.usage = usage
        self.requests: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest, signal: AbortSignal) -> AssistantMessage:
        self.requests.append(request)
        text = "Goal: test." if request.tool_choice == "none" else "answer"
        return AssistantMessage(content=text, usage=self.usage)


def history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(UserMessage(content=f"q{i} {WORDS}"))
        out.append(AssistantMessage(content=f"a{i} {WORDS}"))
    return out


def agent(model: Model, gate: BudgetGate) -> Agent:
    return Agent(
        stream_fn=model,
        messages=history(10),
        compaction=CompactionSettings(window=8_000, keep_last=4),
        loop_options={"budget_gate": gate, "prices": lambda _m: PRICE},
    )


async def test_the_loops_compaction_summary_is_reserved_and_counted() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_output_tokens=100_000))
    model = Model(Usage(input=100, output=40))
    events: list[object] = []
    runner = agent(model, gate)
    runner.subscribe(events.append)
    assert await runner.achat("next") == "answer"
    (notice,) = [e for e in events if isinstance(e, CompactionNotice)]
    assert notice.usage == Usage(input=100, output=40)  # for the session's ledger
    summary, answer = model.requests
    assert answer.tool_choice == "auto"  # the turn, after the summary
    assert summary.tool_choice == "none"
    assert summary.max_tokens is not None  # named what it may spend
    assert gate.tracker.output_tokens == 80  # the summary's 40 and the answer's
    assert gate.tracker.turns == 1  # a compaction is not a turn
    assert gate.reserved == Spend()


async def test_a_compaction_the_budget_cannot_pay_for_is_skipped() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_input_tokens=3_000))
    model = Model(Usage(input=10, output=10))
    events: list[object] = []
    runner = agent(model, gate)
    runner.subscribe(events.append)
    await runner.achat("next")
    assert not [e for e in events if isinstance(e, CompactionNotice)]
    assert model.requests == []  # neither the summary of the middle nor anything else
    assert runner.state.last_end_reason == "budget_exhausted"
    assert gate.tracker.input_tokens == 0


async def test_a_manual_compaction_reserves_from_the_shared_gate() -> None:
    gate = BudgetGate(BudgetLimits(max_turns=None, max_output_tokens=100_000))
    model = Model(Usage(input=100, output=40))
    runner = agent(model, gate)
    assert await runner.compact() is not None
    assert gate.tracker.output_tokens == 40


async def test_the_memory_flush_is_reserved_counted_and_refused_when_it_does_not_fit() -> None:
    model = Model(Usage(input=50, output=30))
    request = ModelRequest(
        model="m",
        system_prompt="memory",
        messages=[UserMessage(content="facts?")],
        tool_choice="none",
    )
    gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=1.0))
    reply = await flush_call(model, request, AbortSignal(), gate, lambda _m: PRICE)
    assert reply.content == "Goal: test."
    assert model.requests[-1].max_tokens == FLUSH_MAX_TOKENS
    assert gate.tracker.cost == pytest.approx(80 * 100 / 1_000_000)
    assert gate.tracker.turns == 0
    tight = BudgetGate(BudgetLimits(max_turns=None, max_cost=0.0001))  # one token's worth
    with pytest.raises(BudgetRefused):
        await flush_call(model, request, AbortSignal(), tight, lambda _m: PRICE)
    assert len(model.requests) == 1  # nothing was sent
