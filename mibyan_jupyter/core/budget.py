"""Budgets: how many model calls, tokens and dollars a run may spend.

The limits and the running totals; the budget gate (:mod:`.budget_gate`) reserves each
call's worst case against them before it is sent, so a limit is never overshot. When one
is reached the loop does not just stop: it asks (``on_budget_exhausted``: continue with a
raised limit) or makes exactly one final call without tools, with an explicit
``max_tokens`` inside what is left, asking the model to sum up, so the user always gets an
answer (Hermes' max-iterations behaviour). Defaults follow Hermes: 500 model calls for a
top-level agent, 50 for a delegated child.

Every attempt counts toward the token and cost budgets, not only the reply that is kept:
a provider announces a retried or failed-over attempt with a notice carrying what it used
(:mod:`.notices`), and :meth:`BudgetTracker.observe` adds it, so a cost budget cannot be
overspent through retries. Attempts do not count as turns (a retry is not an iteration).
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import AgentEvent, BudgetStatus, BudgetUpdated
from .messages import Usage
from .notices import FallbackNotice, RetryNotice

DEFAULT_MAX_TURNS = 500
CHILD_MAX_TURNS = 50


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """``None`` means unlimited. ``max_turns`` counts model calls (Hermes' iterations)."""

    max_turns: int | None = DEFAULT_MAX_TURNS
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "max_input_tokens",
            "max_output_tokens",
            "max_total_tokens",
            "max_cost",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None (unlimited), got {value!r}")

    @classmethod
    def for_child(cls) -> BudgetLimits:
        """The smaller default of a delegated child agent."""
        return cls(max_turns=CHILD_MAX_TURNS)


class BudgetTracker:
    """Running totals against :class:`BudgetLimits`."""

    __slots__ = (
        "cost",
        "input_tokens",
        "limits",
        "output_tokens",
        "turns",
        "unknown_cost",
    )

    def __init__(self, limits: BudgetLimits) -> None:
        self.limits = limits
        self.turns = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.unknown_cost = False
        """Some call's price was unknown: :attr:`cost` is a lower bound."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def record(self, usage: Usage) -> None:
        """Count one model call and what its kept reply used."""
        self.turns += 1
        self.record_attempt(usage)

    def observe(self, event: AgentEvent) -> None:
        """Count what a retried or failed-over attempt used (its notice says); any other
        event is ignored, so the run can pass every event it emits."""
        if isinstance(event, RetryNotice | FallbackNotice) and event.usage is not None:
            self.record_attempt(event.usage)

    def record_attempt(self, usage: Usage) -> None:
        """Add tokens and cost without counting a model call."""
        self.input_tokens += usage.input + usage.cache_read + usage.cache_write
        self.output_tokens += usage.output
        if usage.cost is None:
            if usage.input or usage.output:
                self.unknown_cost = True  # the gate says so once (core/budget_gate.py)
        else:
            self.cost += usage.cost

    def exhausted(self) -> str | None:
        """The first budget that is used up, or ``None``."""
        limits = self.limits
        checks: tuple[tuple[str, float, float | None], ...] = (
            ("turns", self.turns, limits.max_turns),
            ("input_tokens", self.input_tokens, limits.max_input_tokens),
            ("output_tokens", self.output_tokens, limits.max_output_tokens),
            ("total_tokens", self.total_tokens, limits.max_total_tokens),
            ("cost", self.cost, limits.max_cost),
        )
        for name, used, limit in checks:
            if limit is not None and used >= limit:
                return name
        return None

    def describe(self, name: str) -> str:
        """``"turns (500 of 500)"``, for messages to the model and the user."""
        for status in self.snapshot().budgets:
            if status.name == name:
                used = f"{status.used:.4f}" if name == "cost" else f"{status.used:.0f}"
                limit = "unlimited" if status.limit is None else f"{status.limit:g}"
                return f"{name.replace('_', ' ')} ({used} of {limit})"
        raise KeyError(name)

    def snapshot(self) -> BudgetUpdated:
        limits = self.limits
        return BudgetUpdated(
            budgets=(
                BudgetStatus(name="turns", used=self.turns, limit=limits.max_turns),
                BudgetStatus(
                    name="input_tokens", used=self.input_tokens, limit=limits.max_input_tokens
                ),
                BudgetStatus(
                    name="output_tokens", used=self.output_tokens, limit=limits.max_output_tokens
                ),
                BudgetStatus(
                    name="total_tokens", used=self.total_tokens, limit=limits.max_total_tokens
                ),
                BudgetStatus(
                    name="cost", used=self.cost, limit=limits.max_cost, unknown=self.unknown_cost
                ),
            )
        )
