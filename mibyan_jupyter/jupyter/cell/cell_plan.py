"""What one ``%%agent`` cell will do, decided before the run: the plan's type alone, below
both the module that makes plans (:mod:`.plan`) and the one that derives the session's parts
from a plan (:mod:`.context`), so neither has to import the other for it
(docs/architecture.md, "One `%%agent` cell, end to end")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.budget_gate import BudgetGate, PriceFn
from mibyan_jupyter.jupyter.cell.models import ChosenModel
from mibyan_jupyter.jupyter.cell.options import CellOptions

if TYPE_CHECKING:
    from mibyan_jupyter.core.stream import StreamFn


@dataclass(frozen=True)
class CellPlan:
    """What one ``%%agent`` cell will do, decided before the run."""

    options: CellOptions
    model: ChosenModel
    stream_fn: StreamFn
    groups: tuple[str, ...]
    budget: BudgetLimits
    new_session_prompt: str
    """The system prompt a new session starts with (the cell's, the configured, the built-in)."""
    headless: bool
    """Nobody can click (the real cell magic called synchronously): the policy decides."""
    headless_wait: float
    """Seconds to wait for a front end before the policy decides approvals."""
    pins: tuple[str, ...] = ()
    """The session's pinned instructions as recorded (a new session: none)."""
    gate: BudgetGate = field(default_factory=lambda: BudgetGate(BudgetLimits()))
    """The cell's one budget gate: every model call of the cell reserves from it
    (jupyter/cell/budget_ask.py)."""
    prices: PriceFn | None = None
    """The cell's model chain's prices, for the gate (``None``: unknown)."""
