"""The budget's question on the ask card (jupyter/cell/budget_ask.py): when a limit is
reached the run pauses before the summary call; "Continue (+N)" raises that limit and the
same run goes on, "Summarize now" makes the one summary call; headless, the summary.

The agent talks to the loopback fake provider through the real provider client; the card
is answered with a real comm message, as the front end sends it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from view_support import HEADER, Recorder, click, record_comms

from mibyan_jupyter.core import Agent, AgentEnd, AgentStart, tool
from mibyan_jupyter.core.budget_gate import BudgetStop
from mibyan_jupyter.jupyter.cell.budget_ask import budget_asker, budget_question, step_label
from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.options import parse_cell_line
from mibyan_jupyter.jupyter.cell.plan import plan_from_options
from mibyan_jupyter.jupyter.defaults import BUILTIN
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply


@tool
def lookup(name: str) -> str:
    """Look a name up."""
    return f"{name}: found"


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


async def until(condition: Callable[[], object], limit: float = 10.0) -> None:
    for _ in range(int(limit / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def planned(line: str, *, headless: bool = False) -> CellPlan:
    return plan_from_options("go", parse_cell_line(line, BUILTIN), BUILTIN, headless=headless)


def test_the_labels_say_what_continue_adds() -> None:
    assert step_label(BudgetStop("cost", "cost (0.0100 of 0.01)", 0.01)) == "+$0.01"
    assert step_label(BudgetStop("turns", "turns (3 of 3)", 3)) == "+3 turns"
    assert step_label(BudgetStop("total_tokens", "total tokens", 4000)) == "+4,000 tokens"
    question = budget_question(BudgetStop("turns", "turns (3 of 3)", 3))
    assert "turns (3 of 3)" in question
    assert "3 turns more" in question
    assert step_label(BudgetStop("turns", "turns (1 of 1)", 1)) == "+1 turn"


def test_a_plan_holds_one_gate_and_a_headless_plan_asks_nobody() -> None:
    plan = planned("--max-turns 2 --max-cost 0.5")
    assert plan.gate.limits.max_turns == 2
    assert plan.gate.limits.max_cost == 0.5
    assert plan.prices is not None
    assert plan.prices("demo").output == 0.0
    headless = planned("--max-turns 2", headless=True)
    assert budget_asker(AgentView(HEADER), headless) is None


@pytest.mark.parametrize("choice", ["continue", "summarize"])
async def test_continue_goes_on_in_the_same_run_and_summarize_stops(
    recorder: Recorder, fake_provider: FakeProviderServer, tmp_path: Path, choice: str
) -> None:
    fake_provider.push(FakeReply(calls=[FakeCall("lookup", {"name": "a"})]))
    if choice == "continue":
        fake_provider.push(FakeReply(calls=[FakeCall("lookup", {"name": "b"})]))
    fake_provider.push(FakeReply("Summary: looked things up."))
    plan = planned(f"--model fake:m@{fake_provider.base_url} --max-turns 1")
    view = AgentView(HEADER)
    click(view, {"type": "rendered", "next": 0})
    asker = budget_asker(view, plan)
    assert asker is not None
    agent = Agent(
        stream_fn=plan.stream_fn,
        model=plan.model.name,
        tools=[lookup],
        loop_options={"budget_gate": plan.gate, "on_budget_exhausted": asker},
    )
    events: list[object] = []
    agent.subscribe(events.append)
    task = asyncio.create_task(agent.prompt("look up a and b"))
    await until(lambda: recorder.ops("ask"))
    (card,) = recorder.ops("ask")
    labels = [c["label"] for c in card["choices"]]
    assert labels == ["Continue (+1 turn)", "Summarize now"]
    assert card["default"] == "summarize"
    assert "turns (1 of 1)" in card["question"]
    assert len(fake_provider.requests) == 1  # paused before the summary call
    click(view, {"type": "answer", "ask_id": card["id"], "choice": choice})
    if choice == "continue":
        await until(lambda: len(recorder.ops("ask")) == 2)
        second = recorder.ops("ask")[1]
        assert "turns (2 of 2)" in second["question"]
        click(view, {"type": "answer", "ask_id": second["id"], "choice": "summarize"})
    await asyncio.wait_for(task, 10)
    assert sum(isinstance(e, AgentStart) for e in events) == 1  # the same run went on
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert [e.reason for e in ends] == ["budget_exhausted"]
    requests = fake_provider.requests
    assert len(requests) == (3 if choice == "continue" else 2)
    last = requests[-1].body or {}
    assert not last.get("tools")  # the one summary call, tool-less
    assert "[budget]" in str(last.get("messages"))  # its instruction travels as a note
    assert fake_provider.pending == 0
    answered = [op["by"] for op in recorder.ops("answered")]
    assert answered == ["user"] * (2 if choice == "continue" else 1)
