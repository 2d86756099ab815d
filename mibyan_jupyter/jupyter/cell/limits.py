"""The numeric settings of a ``%%agent`` cell and the values each may take, defined once.

Why a table: the cell's flags (``--max-cost``), the magic's traitlets
(``%config AgentMagics.max_cost``) and the help text must refuse the same values with the
same words. Python's ``float`` reads ``nan`` and ``inf`` happily, and a budget of
``nan`` can never be reached (every comparison with it is false), so a cell given one
would spend without limit; a negative or absurd value (a $1,000,000 cap, a billion
turns) is a typo, never a wish. Each is refused before anything is sent to a model, with
one line saying what is allowed (docs/architecture.md, "One `%%agent` cell, end to end").
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limit:
    """One numeric setting: its type, its largest sensible value and its unit."""

    integer: bool
    most: float
    unit: str
    zero: str = "unlimited"
    """What ``0`` means for the configured default (a cell's flag must be positive)."""

    def describe(self) -> str:
        noun = "integer" if self.integer else "number"
        return f"a positive {noun} of at most {self.most:,.0f} {self.unit}"


LIMITS: dict[str, Limit] = {
    "max_turns": Limit(True, 100_000, "model calls"),
    "max_tokens": Limit(True, 100_000_000, "tokens"),
    "max_cost": Limit(False, 10_000, "US dollars"),
    "delegate_turns": Limit(True, 100_000, "model calls of each child agent", zero="50"),
    "context_window": Limit(True, 100_000_000, "tokens", zero="the bundled table"),
    "headless_wait": Limit(False, 3_600, "seconds", zero="no wait"),
}
"""Keyed by the setting's name (a flag is the name with ``-``: ``--max-cost``)."""


class LimitError(ValueError):
    """A refused value; the text is the one line the user sees."""


def flag_value(name: str, text: str | None) -> int | float | None:
    """The value of ``--<name> text`` (``None`` when the flag was not given); raises
    :class:`LimitError` unless it is a finite, positive number within the limit."""
    if text is None:
        return None
    limit = LIMITS[name]
    flag = "--" + name.replace("_", "-")
    try:
        value: int | float = int(text) if limit.integer else float(text)
    except ValueError:
        raise LimitError(f"{flag} must be {limit.describe()}; got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > limit.most:
        raise LimitError(f"{flag} must be {limit.describe()}; got {text!r}")
    return value


def setting_value(name: str, value: int | float) -> int | float:
    """A configured default (``c.AgentMagics.<name>``): as :func:`flag_value`, but ``0``
    is allowed (it means unlimited, or what :attr:`Limit.zero` says)."""
    limit = LIMITS[name]
    if value == 0:
        return value
    if not math.isfinite(value) or value < 0 or value > limit.most:
        raise LimitError(
            f"AgentMagics.{name} must be 0 ({limit.zero}) or {limit.describe()}; got {value!r}"
        )
    return value
