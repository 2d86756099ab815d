"""The run's side of the budget gate: reserve before each model call, settle after.

Why one place (docs/architecture.md, "Budgets"): the loop's turns, its one summary call and
the compaction's summary all call the model, and each must reserve its worst case before
it is sent (core/budget_gate.py). Here a request is measured (its prompt estimated with a
:class:`TokenCounter` calibrated by what the provider reports, plus the tool schemas it
carries), its ``max_tokens`` clamped, and — for a turn — the room the summary call will
need kept back, so reaching a limit still leaves the summary inside the cap. When a turn
cannot be reserved the user is asked (``on_budget_exhausted``): "continue" raises that
limit and the run goes on; otherwise the run makes its one summary call.
"""

from __future__ import annotations

import dataclasses
import logging

from mibyan_jupyter.core.budget_gate import (
    FLOOR_TOKENS,
    BudgetGate,
    BudgetRefused,
    BudgetStop,
    ModelPrice,
    Reservation,
    Spend,
    extra_tokens,
    worst_input,
)
from mibyan_jupyter.core.config import LoopConfig
from mibyan_jupyter.core.events import AgentEvent
from mibyan_jupyter.core.messages import Usage
from mibyan_jupyter.core.notices import FallbackNotice, NoteNotice, RetryNotice
from mibyan_jupyter.core.stream import ModelRequest
from mibyan_jupyter.core.tokens import TokenCounter

from .scope import RunScope
from .waiting import maybe_await

_log = logging.getLogger(__name__)

UNKNOWN_PRICE_NOTE = (
    "[budget] The price of {model} is unknown, so the cost cap cannot be enforced for its "
    "calls: the cost shown counts only calls of known price."
)


class RunBudget:
    """One run's reservations against its gate."""

    def __init__(self, gate: BudgetGate, config: LoopConfig, scope: RunScope) -> None:
        self.gate = gate
        self._config = config
        self._scope = scope
        self.counter = TokenCounter()
        self._estimate: int | None = None
        self._reported = 0
        self._reported_at = 0
        self._warned = False
        self.used_up: str | None = None
        """The limit that stopped the run (set when a turn could not be reserved)."""

    def price(self, model: str) -> ModelPrice | None:
        prices = self._config.prices
        return prices(model) if prices is not None else None

    def input_tokens(self, request: ModelRequest, *, grows: bool = True) -> int:
        """The request's prompt, worst case: the estimate x margin (tool schemas
        included), and never less than the last prompt the provider reported plus what
        was added since (``grows``: this request extends the run's last one; within a
        run a prompt only grows, until a compaction shrinks the estimate)."""
        estimate = self.counter.count(request.messages, request.system_prompt)
        self._estimate = estimate
        worst = worst_input(estimate + extra_tokens(request))
        if grows and self._reported and estimate >= self._reported_at:
            worst = max(worst, self._reported + worst_input(estimate - self._reported_at))
        return worst

    def _saw(self, usage: Usage) -> None:
        """A provider's report of the prompt it billed: the floor of the next one's."""
        reported = usage.input + usage.cache_read + usage.cache_write
        if reported > 0 and self._estimate is not None:
            self._reported, self._reported_at = reported, self._estimate

    def keep_back(self, input_tokens: int, price: ModelPrice | None) -> Spend:
        """What the summary call after this turn would need: its prompt (about this one)
        and its ``summary_max_tokens`` (at most what a quarter of a small cap pays for)."""
        limits = self.gate.limits
        if not self.gate.bounds_output() and limits.max_input_tokens is None:
            return Spend()
        out = min(self._config.summary_max_tokens, self._quarter(price))
        cost = price.cost(input_tokens, out) if price is not None else 0.0
        return Spend(input_tokens=input_tokens, output_tokens=out, cost=cost)

    def _quarter(self, price: ModelPrice | None) -> int:
        """Output tokens a quarter of the tightest output-bounding limit pays for (never
        below the floor): a small cap is not kept back whole for the summary."""
        limits = self.gate.limits
        shares = [n / 4 for n in (limits.max_output_tokens, limits.max_total_tokens) if n]
        if limits.max_cost and price is not None and price.output > 0:
            shares.append(limits.max_cost / 4 / price.output * 1_000_000)
        return max(FLOOR_TOKENS, int(min(shares))) if shares else FLOOR_TOKENS

    async def reserve_turn(self, request: ModelRequest) -> Reservation | None:
        """A reservation for a turn's call (``None``: the run must summarize now, and
        :attr:`used_up` says which limit). Asks the user while a limit is reached."""
        price = self.price(request.model)
        tokens = self.input_tokens(request)
        while True:
            try:
                reservation = self.gate.reserve(
                    tokens, request.max_tokens, price, keep_back=self.keep_back(tokens, price)
                )
            except BudgetRefused as refused:
                if await self._ask(refused.name) == "continue":
                    self.gate.raise_limit(refused.name, self.gate.step(refused.name))
                    continue
                self.used_up = refused.name
                return None
            await self._warn_unknown(request.model)
            return reservation

    def reserve_summary(self, request: ModelRequest, *, grows: bool = True) -> Reservation:
        """The summary call's reservation: what is left, kept back for it (raises
        :class:`BudgetRefused` when not even the floor fits)."""
        price = self.price(request.model)
        return self.gate.reserve(
            self.input_tokens(request, grows=grows), request.max_tokens, price, turns=0
        )

    async def _ask(self, name: str) -> str:
        hook = self._config.on_budget_exhausted
        if hook is None:
            return "summarize"
        stop = BudgetStop(name, self.describe(name), self.gate.step(name))
        try:
            return str(await maybe_await(hook(stop)))
        except Exception:
            _log.exception("on_budget_exhausted failed; summarizing")
            return "summarize"

    def describe(self, name: str) -> str:
        return self.gate.tracker.describe(name)

    async def _warn_unknown(self, model: str) -> None:
        """A cost cap with an unknown price: said once per run, as a notice."""
        if self.gate.unknown_price and not self._warned:
            self._warned = True
            text = UNKNOWN_PRICE_NOTE.format(model=model)
            _log.warning(text)
            await self._scope.emit(NoteNotice(notes=(text,)))

    def observe(self, event: AgentEvent, reservation: Reservation | None) -> bool:
        """Count a retried or failed-over attempt; whether the next attempt still fits.
        The held reservation pays for it, plus whatever the failed attempt showed it
        underestimated (the provider billed a larger prompt than estimated)."""
        if not isinstance(event, RetryNotice | FallbackNotice) or event.usage is None:
            return True
        usage = event.usage
        price = reservation.price if reservation is not None else None
        self.gate.charge(usage, price)
        self._saw(usage)
        if reservation is None:
            return True
        held = reservation.spend
        billed = usage.input + usage.cache_read + usage.cache_write
        extra_in = max(0, billed - held.input_tokens)
        extra_cost = price.cost(extra_in, 0) if price is not None else 0.0
        return self.gate.can_afford(Spend(input_tokens=extra_in, cost=extra_cost))

    def settle(
        self,
        reservation: Reservation | None,
        usage: Usage,
        *,
        turn: bool = True,
        grows: bool = True,
    ) -> None:
        """Count what the call used and release what it held; ``grows``: its prompt is
        the run's transcript (not a compaction's own request), so it floors the next."""
        if reservation is None:
            self.gate.charge(usage, turn=turn)
        else:
            self.gate.settle(reservation, usage, turn=turn)
        if self._estimate is not None:
            reported = usage.input + usage.cache_read + usage.cache_write
            self.counter.calibrate(self._estimate, reported)
            if grows:
                self._saw(usage)


def clamped(request: ModelRequest, reservation: Reservation) -> ModelRequest:
    """The request with the ``max_tokens`` its reservation pays for."""
    if reservation.max_tokens == request.max_tokens:
        return request
    return dataclasses.replace(request, max_tokens=reservation.max_tokens)
