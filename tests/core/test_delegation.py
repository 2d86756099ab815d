"""Delegation in the core, part 1: a child's own turn budget, the cost it shares with its
parent, parallel children, the task id, which tools a child may have and what it inherits
(issue 13, part 3; mibyan_jupyter/core/delegation.py). Over loopback HTTP with real Agents;
the routing fake provider is in tests/delegation_support.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from delegation_support import (
    PARENT,
    Router,
    child_results,
    delegate,
    detail,
    parent_agent,
    replies,
    routed,
    step,
    tool_names,
    tool_results,
    user_text,
)
from support import Recorder, check_grammar

from mibyan_jupyter.core import BudgetLimits, BudgetUpdated, tool
from mibyan_jupyter.core.budget_gate import BudgetGate
from mibyan_jupyter.core.compaction import CompactionSettings
from mibyan_jupyter.core.delegation import CHILD_MAX_TURNS, ChildRun
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import Tool, ToolContext, current_task_id
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.pricing import Price, PriceTable, chain_prices
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import resolve_model
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, FakeUsage
from mibyan_jupyter.testing.context_window import request_tokens
from mibyan_jupyter.testing.scripts import RecordedRequest, ScriptItem


@pytest.fixture
def router() -> Router:
    """Each test fills in ``router.scripts``."""
    return Router({})


@pytest.fixture
async def provider(router: Router) -> AsyncIterator[tuple[FakeProviderServer, ProviderClient]]:
    async with routed(router) as both:
        yield both


@pytest.fixture
def server(provider: tuple[FakeProviderServer, ProviderClient]) -> FakeProviderServer:
    return provider[0]


@pytest.fixture
def client(provider: tuple[FakeProviderServer, ProviderClient]) -> ProviderClient:
    return provider[1]


# -- budgets ----------------------------------------------------------------------------


async def test_a_child_runs_its_own_turns_past_the_parents_turn_limit(
    router: Router, client: ProviderClient
) -> None:
    steps = [FakeReply(calls=[FakeCall("step", {"n": i})]) for i in range(1, 10)]
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-count: take nine steps", call_id="d1")]),
                FakeReply("The child counted."),
            ),
            "goal-count": replies(*steps, FakeReply("Nine steps taken.")),
        }
    )
    gate = BudgetGate(BudgetLimits(max_turns=3))
    children: list[ChildRun] = []
    parent = parent_agent(client, [step], gate, on_child=children.append)
    assert await parent.achat(f"{PARENT} count") == "The child counted."
    [result] = tool_results(parent)
    assert not result.is_error
    assert isinstance(result.content, str)
    assert result.content.startswith("Nine steps taken.")
    assert result.details is not None
    assert result.details["turns"] == 10  # ten model calls, past the parent's limit of 3
    assert result.details["max_turns"] == CHILD_MAX_TURNS == 50  # the default
    assert result.details["status"] == "completed"
    assert gate.tracker.turns == 2  # the parent's own turns only
    assert parent.state.last_end_reason == "completed"
    [child] = children
    assert child.gate.limits.max_turns == 50
    assert child.gate.parent is gate
    assert child.tools == ("step",)
    assert len(router.of("goal-count")) == 10


async def test_a_child_that_reaches_its_own_turn_limit_sums_up_and_says_so(
    router: Router, client: ProviderClient
) -> None:
    def forever(turn: int, request: RecordedRequest) -> ScriptItem:
        if not (request.body or {}).get("tools"):  # the summary call offers no tools
            return FakeReply("I took four steps and was stopped.")
        return FakeReply(calls=[FakeCall("step", {"n": turn})])

    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-forever", call_id="d1")]), FakeReply("ok")
            ),
            "goal-forever": forever,
        }
    )
    gate = BudgetGate(BudgetLimits(max_turns=10))
    parent = parent_agent(client, [step], gate, max_turns=4)
    await parent.achat(f"{PARENT} go")
    [result] = tool_results(parent)
    details = result.details or {}
    assert details["status"] == "budget_exhausted"
    assert details["end_reason"] == "budget_exhausted"
    assert details["max_turns"] == 4
    assert not result.is_error  # it has an answer: the summary
    text = str(result.content)
    assert text.startswith("I took four steps and was stopped.")
    assert "(The sub-agent stopped at its own limit of 4 turns.)" in text
    assert "5 turns (limit 4)" in text  # four, then the summary
    assert parent.state.last_end_reason == "completed"


PRICE = Price(2.0, 8.0)  # $ per million tokens
TABLE = PriceTable({"priced": PRICE})


@dataclass
class Billing:
    """Bills each request as a provider would (its own token count, output cut at the
    request's max tokens), and answers it: the parent delegates two goals at once, each
    child calls ``step`` until the money runs out."""

    bill: list[float] = field(default_factory=list)
    first: dict[str, float] = field(default_factory=dict)

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        body = request.body or {}
        who = user_text(body)[:7]
        self.first.setdefault(who, request.time)
        allowed = int(body.get("max_completion_tokens") or 100_000)
        tokens_in, tokens_out = request_tokens(body), min(400, allowed)
        self.bill.append((tokens_in * PRICE.input + tokens_out * PRICE.output) / 1e6)
        usage = FakeUsage(input=tokens_in, output=tokens_out)
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if who.startswith(PARENT) and turn == 0:
            calls = [delegate(f"goal-{x}: step on", call_id=f"d{x}") for x in "ab"]
            return FakeReply(calls=calls, usage=usage)
        if not body.get("tools") or who.startswith(PARENT):
            return FakeReply("words " * 60, usage=usage)
        return FakeReply(calls=[FakeCall("step", {"n": turn})], usage=usage)


async def test_parallel_children_together_never_spend_more_than_the_parent_has() -> None:
    billing = Billing()
    cap = 0.03
    with FakeProviderServer(fallback=billing) as server:
        priced = ProviderClient(retry=RetryPolicy(max_retries=0), prices=TABLE)
        priced.register("main", resolve_model(f"openai:priced@{server.base_url}", api_key="sk-d-1"))
        gate = BudgetGate(BudgetLimits(max_turns=None, max_cost=cap))
        parent = parent_agent(priced, [step], gate)
        parent.loop_options["prices"] = chain_prices([("openai", "priced")], TABLE)
        updates: list[BudgetUpdated] = []
        parent.subscribe(lambda e: updates.append(e) if isinstance(e, BudgetUpdated) else None)
        try:
            await parent.achat(f"{PARENT} spend")
        finally:
            await priced.aclose()
    spent = sum(billing.bill)
    assert spent <= cap * (1 + 1e-9)  # the server's own bill, parent and children
    assert spent > cap * 0.5  # the children did spend, up to near the cap
    results = tool_results(parent)
    assert [r.tool_call_id for r in results] == ["da", "db"]
    child_cost = sum(detail(r, "cost") for r in results)
    assert child_cost > 0
    assert gate.tracker.cost == pytest.approx(spent)  # the parent's totals include them
    used = {s.name: s.used for s in updates[-1].budgets}
    assert used["cost"] == pytest.approx(spent)  # and so do its budget bars
    children_turns = sum(detail(r, "turns") for r in results)
    assert gate.tracker.turns < children_turns  # turns are the parent's own
    assert gate.reserved.cost == pytest.approx(0.0, abs=1e-12)  # nothing left held


# -- parallel children and the task id ---------------------------------------------------


@dataclass
class Barrier:
    """An async tool that returns only once ``parties`` calls are waiting in it: children
    that ran one after the other would never get past it."""

    parties: int
    arrived: list[str | None] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def tool(self) -> Tool:
        @tool(side_effects=False)
        async def meet(call: ToolContext | None = None) -> str:
            """Wait for the other sub-agents."""
            assert call is not None
            self.arrived.append(call.task_id)
            if len(self.arrived) >= self.parties:
                self.event.set()
            await asyncio.wait_for(self.event.wait(), 3)  # sequential children: TimeoutError
            return f"met as {call.task_id}"

        return meet


async def test_parallel_children_run_at_once_and_their_calls_carry_their_task_id(
    router: Router, client: ProviderClient
) -> None:
    seen_ids: list[str | None] = []

    @tool(side_effects=False)
    def where() -> str:
        """Say which task this is (a sync tool: runs in a worker thread)."""
        seen_ids.append(current_task_id())
        return f"in {current_task_id()}"

    barrier = Barrier(2)
    child = replies(
        FakeReply(calls=[FakeCall("meet", {}), FakeCall("where", {})]), FakeReply("met")
    )
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(
                    calls=[
                        delegate("goal-a", call_id="da"),
                        delegate("goal-b", call_id="db"),
                        FakeCall("where", {}, id="w0"),
                    ]
                ),
                FakeReply("both done"),
            ),
            "goal-a": child,
            "goal-b": child,
        }
    )
    gate = BudgetGate(BudgetLimits())
    runs: list[ChildRun] = []
    recorders: dict[str, Recorder] = {}

    def on_child(run: ChildRun) -> Callable[[], None]:
        runs.append(run)
        recorders[run.child_id] = recorder = Recorder()
        return run.agent.subscribe(recorder)

    parent = parent_agent(client, [barrier.tool(), where], gate, on_child=on_child)
    assert await parent.achat(f"{PARENT} both") == "both done"
    assert sorted(barrier.arrived, key=str) == ["child-1", "child-2"]
    assert sorted(map(str, seen_ids)) == ["None", "child-1", "child-2"]  # None: the parent's
    a, b = router.of("goal-a"), router.of("goal-b")
    assert max(a[0].time, b[0].time) < min(a[-1].time, b[-1].time)  # both began before either ended
    assert {r.parent_call_id for r in runs} == {"da", "db"}
    assert all(r.parent_task_id is None for r in runs)
    for recorder in recorders.values():
        check_grammar(recorder.events)
    met = [m for m in child_results(runs) if m.name == "meet"]
    assert sorted(str(m.content) for m in met) == ["met as child-1", "met as child-2"]
    details = [m.details or {} for m in tool_results(parent)]
    assert sorted(str(d["child_id"]) for d in details) == ["child-1", "child-2"]


# -- what a child may have ----------------------------------------------------------------


async def test_a_child_gets_a_subset_of_the_parents_tools_and_never_delegates(
    router: Router, client: ProviderClient
) -> None:
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(
                    calls=[
                        delegate("goal-shell", call_id="d1", tools=["run_shell"]),
                        delegate("goal-deeper", call_id="d2", tools=["step", "delegate_task"]),
                        delegate("  ", call_id="d2b"),
                    ]
                ),
                FakeReply(calls=[delegate("goal-all: anything", call_id="d3")]),
                FakeReply("done"),
            ),
            "goal-all": replies(FakeReply("nothing to do")),
        }
    )

    @tool
    def memory_add(entry: str) -> str:
        """Remember ``entry``."""
        return "kept"

    parent = parent_agent(client, [step, memory_add], BudgetGate(BudgetLimits()))
    assert await parent.achat(f"{PARENT} try") == "done"
    shell, deeper, blank, everything = tool_results(parent)
    assert blank.is_error
    assert str(blank.content) == "delegate_task needs a goal: say what to do."
    for refused in (shell, deeper):
        assert refused.is_error
        assert (refused.details or {})["status"] == "refused"
        assert (refused.details or {})["tools"] == ["step"]
    assert "run_shell (not one of your tools)" in str(shell.content)
    assert "delegate_task (a sub-agent never gets it)" in str(deeper.content)
    assert "subset of yours: step" in str(shell.content)
    assert router.of("goal-shell") == []
    assert router.of("goal-deeper") == []
    [asked] = router.of("goal-all")
    assert tool_names(asked) == ["step"]  # no delegate_task, no memory writes
    assert (everything.details or {})["tools"] == ["step"]
    assert "step" in parent.state.tools["delegate_task"].description


# -- what a child inherits ----------------------------------------------------------------


async def test_a_child_runs_on_the_parents_model_settings_but_never_asks_the_user(
    router: Router, client: ProviderClient
) -> None:
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-s", call_id="d1", context="the data is in df")]),
                FakeReply("ok"),
            ),
            "goal-s": replies(FakeReply("fine")),
        }
    )

    async def confirm(plan: object) -> bool:
        return True

    async def ask(stop: object) -> str:
        return "continue"

    def guard(before: object, signal: AbortSignal) -> None:
        return None

    def prices(model: str) -> None:
        return None

    runs: list[ChildRun] = []
    parent = parent_agent(client, [step], BudgetGate(BudgetLimits()), on_child=runs.append)
    parent.state.thinking_level = "low"
    parent.tool_execution = "sequential"
    parent.compaction = CompactionSettings(window=50_000, mode="ask", confirm=confirm)
    parent.loop_options.update(
        {"on_budget_exhausted": ask, "before_tool_call": guard, "prices": prices}
    )
    assert await parent.achat(f"{PARENT} settings") == "ok"
    [run] = runs
    child = run.agent
    assert child.stream_fn is parent.stream_fn
    assert child.state.model == "main"
    assert child.state.thinking_level == "low"
    assert child.tool_execution == "sequential"
    assert child.compaction is not None
    assert child.compaction.mode == "auto"  # a child never asks before compacting
    assert child.compaction.confirm is None
    assert child.compaction.window == 50_000
    assert "on_budget_exhausted" not in child.loop_options  # it sums up at its limit
    assert child.loop_options["before_tool_call"] is guard  # a guard is a permission too
    assert child.loop_options["prices"] is prices
    assert child.loop_options["budget_gate"] is run.gate
    assert "the data is in df" in child.state.system_prompt
    [request] = router.of("goal-s")
    system = (request.body or {})["messages"][0]
    assert system["role"] == "system"
    assert "Context from the agent that delegated the task:\nthe data is in df" in system["content"]
    assert user_text(request.body or {}).startswith("goal-s")


async def test_no_more_children_run_at_once_than_max_parallel_and_the_others_wait(
    router: Router, client: ProviderClient
) -> None:
    """Four delegate calls in one message with ``max_parallel=2``: all four children run
    and answer, never more than two at once (the others wait for a slot, not refused)."""
    running: list[str | None] = []
    most = 0

    @tool(side_effects=False)
    async def work() -> str:
        """Do a slow piece of work."""
        nonlocal most
        running.append(current_task_id())
        most = max(most, len(running))
        await asyncio.sleep(0.05)
        running.remove(current_task_id())
        return "worked"

    child = replies(FakeReply(calls=[FakeCall("work", {})]), FakeReply("child done"))
    goals = [f"goal-{n}" for n in range(4)]
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate(g, call_id=f"d{n}") for n, g in enumerate(goals)]),
                FakeReply("all done"),
            ),
            **dict.fromkeys(goals, child),
        }
    )
    gate = BudgetGate(BudgetLimits())
    parent = parent_agent(client, [work], gate, max_parallel=2)
    assert await parent.achat(f"{PARENT} four") == "all done"
    assert most == 2
    results = tool_results(parent)
    assert len(results) == 4
    assert all("child done" in str(r.content) for r in results)
