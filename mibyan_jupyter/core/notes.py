"""Ephemeral notes: what the model should know for one request, never stored.

Why not in the system prompt (docs/architecture.md, "Prompt builder"): the system block
is the cached head of every request; a budget warning or the user's variables as they are
now would change it each turn and miss the provider's prompt cache. Notes travel on the
request (``ModelRequest.notes``), each adapter renders them after the transcript, and the
view shows them as notices (a :class:`~.notices.NoteNotice`), never as a "You" message.

The defaults: a budget warning when a budget passes 70 % and again at 90 % (once per
threshold per run), and a context-pressure note when the prompt passes 60 % and 80 % of
the model's window. The caller's ``NotesFn`` adds its own (the Jupyter layer: a summary of
the kernel's variables).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from .events import BudgetUpdated

BUDGET_THRESHOLDS = (0.70, 0.90)
CONTEXT_THRESHOLDS = (0.60, 0.80)


@dataclass(frozen=True, slots=True)
class NoteContext:
    """What a notes function sees before a model call."""

    budget: BudgetUpdated
    tokens: int | None
    """The estimated prompt tokens of the request (``None``: not estimated)."""
    window: int | None
    """The model's context window, when known."""


NotesFn: TypeAlias = Callable[[NoteContext], Sequence[str] | Awaitable[Sequence[str]]]


def _percent(share: float) -> str:
    return f"{round(share * 100)} %"


@dataclass
class DefaultNotes:
    """The run's default notes; remembers which thresholds it already announced."""

    _fired: set[tuple[str, float]] = field(default_factory=set)

    def __call__(self, context: NoteContext) -> list[str]:
        return [*self._budget(context.budget), *self._context(context.tokens, context.window)]

    def _crossed(self, key: str, share: float, thresholds: tuple[float, ...]) -> float | None:
        """The highest threshold ``share`` passes that was not announced yet."""
        passed = [t for t in thresholds if share >= t and (key, t) not in self._fired]
        for t in passed:
            self._fired.add((key, t))
        return max(passed) if passed else None

    def _budget(self, budget: BudgetUpdated) -> list[str]:
        notes = []
        for status in budget.budgets:
            if not status.limit:
                continue
            share = status.used / status.limit
            if self._crossed(status.name, share, BUDGET_THRESHOLDS) is not None:
                used = f"{status.used:g} of {status.limit:g}"
                notes.append(
                    f"[budget] {_percent(share)} of the {status.name.replace('_', ' ')} budget "
                    f"is used ({used}). Plan to finish soon; prefer the fewest further calls."
                )
        return notes

    def _context(self, tokens: int | None, window: int | None) -> list[str]:
        if tokens is None or not window:
            return []
        share = tokens / window
        if self._crossed("context", share, CONTEXT_THRESHOLDS) is None:
            return []
        return [
            f"[context] The conversation fills about {_percent(share)} of your context window "
            f"({tokens:,} of {window:,} tokens). Keep tool output small (head, filters, "
            "summaries) and say what you have found so far."
        ]
