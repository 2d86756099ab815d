"""A cell's budget: one gate for the whole cell, and the question asked when it runs out.

Why one gate per cell (docs/architecture.md, "Budgets"): the run's turns, its summary, a
compaction's summary and the memory flushes all call the model, and the cell's
``--max-cost`` / ``--max-tokens`` / ``--max-turns`` cap all of them together; so the plan
holds one :class:`~mibyan_jupyter.core.budget_gate.BudgetGate` and every call reserves
from it. Prices come from the provider's price table for the cell's model and its
fallbacks (the dearest of the chain; the demo models cost nothing).

When a limit is reached the run pauses before its summary call and asks on the ask card
(jupyter/view/ask.py): **Continue (+N)** raises that limit by N (the limit as the cell
set it) and the same run goes on; **Summarize now** makes the one summary call. Without a
front end the answer is "summarize", as before this card existed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.budget_gate import BudgetStop, ModelPrice, PriceFn
from mibyan_jupyter.jupyter.view.ask import Choice, ask

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.cell.models import ChosenModel
    from mibyan_jupyter.jupyter.view import AgentView

SUMMARIZE = Choice("summarize", "Summarize now", "one last call, without tools, sums up the work")
Asker = Callable[[BudgetStop], Awaitable[str]]


def cell_prices(chosen: ChosenModel, fallbacks: tuple[ChosenModel, ...] = ()) -> PriceFn:
    """The price function of a cell's model chain (the demo models are free)."""
    if chosen.demo or chosen.spec is None:
        free = ModelPrice(0.0, 0.0)
        return lambda _model: free
    from mibyan_jupyter.providers.pricing import chain_prices

    chain = [chosen, *fallbacks]
    return chain_prices([(m.spec.provider, m.spec.model_id) for m in chain if m.spec is not None])


def step_label(stop: BudgetStop) -> str:
    """``+$0.01``, ``+5 turns``, ``+4,000 tokens``: what Continue adds, on its button."""
    if stop.name == "cost":
        return f"+${stop.step:.4g}"
    if stop.name == "turns":
        return f"+{stop.step:.0f} turn{'' if stop.step == 1 else 's'}"
    return f"+{stop.step:,.0f} tokens"


def budget_question(stop: BudgetStop) -> str:
    return (
        f"Budget reached: {stop.text}. Continue with {step_label(stop)[1:]} more, or have "
        "the agent summarize its work now?"
    )


def budget_asker(view: AgentView, plan: CellPlan) -> Asker | None:
    """The ``on_budget_exhausted`` hook of a cell with a view (``None``: headless, the
    run summarizes as it always did)."""
    if plan.headless:
        return None

    async def asker(stop: BudgetStop) -> str:
        go_on = Choice(
            "continue",
            f"Continue ({step_label(stop)})",
            f"raise the {stop.name.replace('_', ' ')} limit and let the run go on",
        )
        answer = await ask(
            view,
            budget_question(stop),
            [go_on, SUMMARIZE],
            default=SUMMARIZE.value,
            headless_wait=plan.headless_wait,
        )
        return answer.value

    return asker


def budget_options(plan: CellPlan, view: AgentView | None) -> dict[str, Any]:
    """The loop options that put the cell's gate, prices and question on its agent."""
    return {
        "budget_gate": plan.gate,
        "prices": plan.prices,
        "on_budget_exhausted": budget_asker(view, plan) if view is not None else None,
    }
