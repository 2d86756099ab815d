"""The budget gate: every model call reserves its worst case before it is sent.

Why reserve instead of checking after (docs/architecture.md, "Budgets"): a budget checked
after each reply is overshot by the reply that crosses it, and by the summary call made
once it is crossed (a ``--max-cost 0.01`` run spent $0.024). So before each call the gate
is asked for the call's worst case — the prompt's estimated input tokens times the input
price plus ``max_tokens`` times the output price — and holds it as a :class:`Reservation`;
after the call the reservation is settled with the usage the provider reported (every
attempt: retries and failovers too) and what was not used is released. ``max_tokens`` is
clamped to what the remaining budget can pay for, down to :data:`FLOOR_TOKENS`; below that
the call is refused (:class:`BudgetRefused`) and nothing is sent.

Parallel consumers (tool calls that ask a model, delegated children) reserve from the same
gate under one lock, so N of them can never each spend the whole remainder. A child gate
(:meth:`BudgetGate.child`) has limits of its own and reserves from its parent too, so a
child agent shares the parent's cost cap.

A model whose price is unknown cannot be reserved against a cost cap: its calls go ahead,
the gate says so once (:attr:`BudgetGate.unknown_price`), and the cost shown is a lower
bound marked unknown.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from .budget import BudgetLimits, BudgetTracker
from .messages import Usage
from .stream import ModelRequest, ToolSpec
from .tokens import TokenCounter

FLOOR_TOKENS = 256
"""The smallest ``max_tokens`` worth a call: a reply cut at fewer tokens says too little."""
UNSET_MAX_TOKENS = 8192
"""The worst case of a call that names no ``max_tokens`` while an output-bounding limit is
set; the gate then sends this (or less) explicitly, as the Anthropic adapter does anyway."""
INPUT_MARGIN = 1.25
"""The prompt's token estimate (core/tokens.py) times this is its worst case: the estimate
is a heuristic, calibrated but not an upper bound."""
NOTES_HEADER_TOKENS = 32
"""The header line the adapters put before a request's notes (providers/notes.py)."""
LimitName: TypeAlias = str


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens. ``input`` is the dearest way an input token is billed
    (an Anthropic cache write costs more than a plain input token)."""

    input: float
    output: float

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


PriceFn: TypeAlias = Callable[[str], ModelPrice | None]
"""A model name (as the request names it) to its price; ``None``: unknown."""


@dataclass(frozen=True, slots=True)
class Spend:
    """An amount of every budget at once."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, other: Spend, sign: int = 1) -> Spend:
        return Spend(
            self.turns + sign * other.turns,
            self.input_tokens + sign * other.input_tokens,
            self.output_tokens + sign * other.output_tokens,
            self.cost + sign * other.cost,
        )


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one call holds until it is settled or released."""

    spend: Spend
    max_tokens: int | None
    """The call's ``max_tokens``: the requested one, clamped (``None``: not bounded)."""
    price: ModelPrice | None


@dataclass(frozen=True, slots=True)
class BudgetStop:
    """What ``on_budget_exhausted`` is asked about: the limit reached, said in words, and
    the step "Continue" would raise it by."""

    name: LimitName
    text: str
    step: float


class BudgetRefused(Exception):
    """Not even :data:`FLOOR_TOKENS` fit: ``name`` is the limit that is used up."""

    def __init__(self, name: LimitName, text: str) -> None:
        super().__init__(text)
        self.name = name


def worst_input(estimate: int) -> int:
    return math.ceil(estimate * INPUT_MARGIN)


def schema_tokens(tools: Sequence[ToolSpec]) -> int:
    """The tool schemas a request carries, which providers bill as input too (their
    JSON at 3 characters a token: keys included, so more than a tokenizer counts)."""
    if not tools:
        return 0
    text = json.dumps([dataclasses.asdict(spec) for spec in tools], default=str)
    return len(text) // 3 + 1


def extra_tokens(request: ModelRequest) -> int:
    """What a request carries besides its messages and system prompt: the tool schemas
    and the notes (with their header line), at 3 characters a token."""
    notes = " ".join(request.notes)
    return schema_tokens(request.tools) + (len(notes) // 3 + NOTES_HEADER_TOKENS if notes else 0)


def request_input_tokens(request: ModelRequest) -> int:
    """The worst-case input tokens of a request made outside a run (a memory flush):
    its messages, system prompt, tool schemas and notes, estimated, times the margin."""
    estimate = TokenCounter().count(request.messages, request.system_prompt)
    return worst_input(estimate + extra_tokens(request))


class BudgetGate:
    """Limits, what was spent (a :class:`BudgetTracker`) and what is reserved."""

    def __init__(self, limits: BudgetLimits, *, parent: BudgetGate | None = None) -> None:
        self.tracker = BudgetTracker(limits)
        self.parent = parent
        self.reserved = Spend()
        self._first = limits
        self.unknown_price = False
        """A call went ahead under a cost cap without a known price (the cost is a floor)."""
        self._lock: threading.RLock = parent._lock if parent is not None else threading.RLock()

    @property
    def limits(self) -> BudgetLimits:
        return self.tracker.limits

    def child(self, limits: BudgetLimits | None = None) -> BudgetGate:
        """A gate for a delegated agent: its own limits (default: a child's turns), and
        every reservation also held by this gate, so the parent's caps hold for both."""
        return BudgetGate(limits or BudgetLimits.for_child(), parent=self)

    # -- what is left -------------------------------------------------------------------

    def _own_left(self, name: LimitName) -> float | None:
        limit = getattr(self.limits, f"max_{name}")
        if limit is None:
            return None
        tracker, reserved = self.tracker, self.reserved
        used = float(getattr(tracker, name)) + float(getattr(reserved, name))
        return float(limit) - used

    def remaining(self, name: LimitName) -> float | None:
        """What is left of one budget after spending and reservations (this gate and its
        parents); ``None``: unlimited."""
        with self._lock:
            gates = [self] if name == "turns" else self._family()  # a child has its own turns
            lefts = [x for g in gates if (x := g._own_left(name)) is not None]
            return min(lefts) if lefts else None

    def _family(self) -> list[BudgetGate]:
        gates: list[BudgetGate] = [self]
        while (parent := gates[-1].parent) is not None:
            gates.append(parent)
        return gates

    def can_afford(self, spend: Spend) -> bool:
        with self._lock:
            return self._blocking(spend) is None

    def _blocking(self, spend: Spend) -> LimitName | None:
        for name in ("turns", "input_tokens", "output_tokens", "total_tokens", "cost"):
            left = self.remaining(name)
            if left is not None and float(getattr(spend, name)) > left + 1e-12:
                return name
        return None

    def affordable(
        self,
        input_tokens: int,
        price: ModelPrice | None,
        keep_back: Spend = Spend(),
        turns: int = 1,
    ) -> tuple[int | None, LimitName | None]:
        """The largest ``max_tokens`` a call with ``input_tokens`` can pay for after
        ``keep_back`` (``None``: unbounded), and the limit that bounds it most."""
        with self._lock:
            blocked = self._blocking(keep_back.plus(Spend(turns=turns, input_tokens=input_tokens)))
            if blocked is not None:
                return 0, blocked
            bounds: list[tuple[float, LimitName]] = []
            for name, room in (
                ("output_tokens", self._room("output_tokens", keep_back.output_tokens)),
                ("total_tokens", self._room("total_tokens", keep_back.total_tokens + input_tokens)),
            ):
                if room is not None:
                    bounds.append((room, name))
            cost_left = self._room("cost", keep_back.cost)
            if cost_left is not None and price is not None:
                cost_left -= price.cost(input_tokens, 0)
                if cost_left < 0:
                    return 0, "cost"
                if price.output > 0:
                    bounds.append((cost_left * 1_000_000 / price.output, "cost"))
            if not bounds:
                return None, None
            room, name = min(bounds)
            return max(0, math.floor(room + 1e-9)), name

    def _room(self, name: LimitName, minus: float) -> float | None:
        left = self.remaining(name)
        return None if left is None else left - minus

    def bounds_output(self) -> bool:
        """Whether a call must name its ``max_tokens`` (an output-bounding limit is set)."""
        return any(
            getattr(g.limits, f"max_{n}") is not None
            for g in self._family()
            for n in ("output_tokens", "total_tokens", "cost")
        )

    # -- reserving ----------------------------------------------------------------------

    def reserve(
        self,
        input_tokens: int,
        max_tokens: int | None,
        price: ModelPrice | None,
        *,
        keep_back: Spend = Spend(),
        turns: int = 1,
    ) -> Reservation:
        """Hold the worst case of a call; ``max_tokens`` is clamped to what is left after
        ``keep_back`` (never below ``min(FLOOR_TOKENS, max_tokens)``). Raises
        :class:`BudgetRefused` when even that does not fit."""
        with self._lock:
            if price is None and self._cost_capped():
                self.unknown_price = True
            room, name = self.affordable(input_tokens, price, keep_back, turns)
            wanted = max_tokens  # a bounded room needs a named max_tokens
            if wanted is None and room is not None:
                wanted = UNSET_MAX_TOKENS
            floor = min(FLOOR_TOKENS, wanted) if wanted is not None else FLOOR_TOKENS
            if room is not None and room < floor:
                raise BudgetRefused(name or "cost", f"the {name} budget cannot pay for a call")
            clamped = wanted if room is None or wanted is None else min(wanted, room)
            out = clamped or 0
            spend = Spend(
                turns=turns,
                input_tokens=input_tokens,
                output_tokens=out,
                cost=price.cost(input_tokens, out) if price is not None else 0.0,
            )
            self.reserved = self.reserved.plus(spend)
            for gate in self._family()[1:]:  # a child's turns are not its parent's
                gate.reserved = gate.reserved.plus(replace(spend, turns=0))
            return Reservation(spend, clamped, price)

    def _cost_capped(self) -> bool:
        return any(g.limits.max_cost is not None for g in self._family())

    def release(self, reservation: Reservation) -> None:
        """Give back what ``reservation`` held (the call was not made, or is settled)."""
        with self._lock:
            self.reserved = self.reserved.plus(reservation.spend, -1)
            for gate in self._family()[1:]:
                gate.reserved = gate.reserved.plus(replace(reservation.spend, turns=0), -1)

    def charge(self, usage: Usage, price: ModelPrice | None = None, *, turn: bool = False) -> None:
        """Count what an attempt used (``turn``: a model call's kept reply). A usage the
        provider could not price is priced with ``price`` when that is known."""
        if usage.cost is None and price is not None:
            tokens = usage.input + usage.cache_read + usage.cache_write
            usage = usage.model_copy(update={"cost": price.cost(tokens, usage.output)})
        with self._lock:
            (self.tracker.record if turn else self.tracker.record_attempt)(usage)
            for gate in self._family()[1:]:
                gate.tracker.record_attempt(usage)
            if usage.cost is None and self._cost_capped() and (usage.input or usage.output):
                self.unknown_price = True

    def settle(self, reservation: Reservation, usage: Usage, *, turn: bool = True) -> None:
        """The call is over: release its reservation and count what it used."""
        with self._lock:
            self.release(reservation)
            self.charge(usage, reservation.price, turn=turn)

    # -- when a limit is reached --------------------------------------------------------

    def raise_limit(self, name: LimitName, by: float) -> None:
        """Raise one of this gate's limits by ``by`` (the user chose "Continue")."""
        with self._lock:
            field = f"max_{name}"
            current = getattr(self.limits, field)
            if current is None:
                return
            value = current + by if name == "cost" else int(current + by)
            self.tracker.limits = replace(self.limits, **{field: value})

    def step(self, name: LimitName) -> float:
        """A sensible "Continue (+N)": the limit as it was first set."""
        return float(getattr(self._first, f"max_{name}") or 0) or 1.0
