"""Compaction inside the loop: when, and the steps of one compaction.

The loop asks :class:`Compactor` before each model call (over the preflight share of the
window), between turns (over the aggressive share) and after a ``context_overflow`` reply
(then the call is retried once). One compaction (docs/architecture.md, "Context
compression"): plan the cut, ask the user when the mode is ``ask``, run the memory flush
hook, summarise the middle with the run's own ``stream_fn`` (tool-less; reserved through the
budget gate like every model call, and skipped when the budget cannot pay for it), replace the transcript list's contents in place (it is the Agent's state
list), forget the model view and the token counts, and emit a :class:`CompactionNotice`
holding the compacted transcript for the store's child session. A failed summary, a
declined confirmation or a failing hook compacts nothing and the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mibyan_jupyter.core.budget_gate import BudgetRefused
from mibyan_jupyter.core.compaction import (
    CompactionPlan,
    CompactionSettings,
    SummaryFailed,
    compacted,
    plan_cut,
    summarise,
    summary_request,
)
from mibyan_jupyter.core.config import AgentContext, LoopConfig
from mibyan_jupyter.core.events import EventEmit
from mibyan_jupyter.core.messages import AssistantMessage, Message, Usage
from mibyan_jupyter.core.notices import CompactionNotice, CompactionReason
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamFn
from mibyan_jupyter.core.tokens import TokenCounter

from .budgeted import RunBudget
from .scope import RunScope

_log = logging.getLogger(__name__)


class Compactor:
    """One run's compaction state: the token counter and the settings."""

    def __init__(
        self,
        settings: CompactionSettings | None,
        scope: RunScope,
        *,
        budget: RunBudget | None,
        reset_view: Callable[[], None],
        counter: TokenCounter | None = None,
    ) -> None:
        self.settings = settings
        self.counter = counter if counter is not None else TokenCounter()
        self._scope = scope
        self._budget = budget
        self._reset_view = reset_view
        self.last_estimate: int | None = None

    @property
    def window(self) -> int | None:
        return self.settings.window if self.settings is not None else None

    def estimate(self) -> int:
        """The estimated prompt tokens of the transcript as it is now."""
        scope = self._scope
        self.last_estimate = self.counter.count(scope.context.messages, scope.context.system_prompt)
        return self.last_estimate

    def calibrate(self, usage: Usage) -> None:
        """Correct the estimate by what the provider reported for the last prompt."""
        if self.last_estimate is not None:
            reported = usage.input + usage.cache_read + usage.cache_write
            self.counter.calibrate(self.last_estimate, reported)

    def _auto(self) -> CompactionSettings | None:
        settings = self.settings
        return settings if settings is not None and settings.mode != "off" else None

    async def before_call(self, *, first: bool) -> CompactionNotice | None:
        """Before the run's first call, compact over the preflight share; before the
        later calls of its tool loop, only over the aggressive share (Hermes' rule)."""
        if self.settings is None:
            return None
        tokens = self.estimate()  # also what the notes report as context pressure
        settings = self._auto()
        if settings is None or not settings.due(tokens, between_turns=not first):
            return None
        return await self.compact("preflight" if first else "aggressive", tokens)

    async def on_overflow(self) -> CompactionNotice | None:
        if self._auto() is None:
            return None
        return await self.compact("overflow", self.estimate())

    async def compact(
        self, reason: CompactionReason, tokens: int | None = None
    ) -> CompactionNotice | None:
        """One compaction; ``None`` when nothing was compacted (nothing to cut, declined,
        the hook or the summary failed)."""
        scope = self._scope
        messages: list[Message] = scope.context.messages
        settings = self.settings or CompactionSettings(window=None)
        tokens = self.estimate() if tokens is None else tokens
        cut = plan_cut(messages, settings.keep_last)
        if cut is None:
            return None
        plan = CompactionPlan(
            reason, tokens, settings.window, cut.summarised, cut.head, len(messages) - cut.tail
        )
        asks = settings.mode == "ask" and settings.confirm is not None and reason != "manual"
        if asks and settings.confirm is not None and not await settings.confirm(plan):
            return None
        middle = messages[cut.head : cut.tail]
        if settings.before_compaction is not None:
            try:
                await settings.before_compaction(middle)
            except Exception:
                _log.exception("the before_compaction hook failed; compacting without it")
        request = summary_request(scope.config.model, scope.context.system_prompt, middle)
        summary = await self._summarise(request)
        if summary is None:
            return None
        before = len(messages)
        messages[:] = compacted(messages, cut, summary.content or "")
        self.counter.reset()
        self._reset_view()
        notice = CompactionNotice(
            messages_before=before,
            messages_after=len(messages),
            tokens_before=tokens,
            tokens_after=self.estimate(),
            summary=(summary.content or "").strip(),
            reason=reason,
            summarised=plan.summarised,
            kept_head=plan.kept_head,
            kept_tail=plan.kept_tail,
            messages=tuple(messages),
            usage=summary.usage,
        )
        await scope.emit(notice)
        return notice

    async def _summarise(self, request: ModelRequest) -> AssistantMessage | None:
        """The summary call, reserved through the run's budget gate (``None``: failed,
        or the budget cannot pay for it; what a failed call used still counts)."""
        budget = self._budget
        reservation = None
        if budget is not None:
            try:
                reservation = budget.reserve_summary(request, grows=False)
            except BudgetRefused as refused:
                _log.warning("compaction skipped: the %s budget cannot pay for it", refused.name)
                return None
            if reservation.max_tokens != request.max_tokens:
                request = dataclasses.replace(request, max_tokens=reservation.max_tokens)
        used = Usage()
        try:
            summary = await summarise(self._scope.stream_fn, request, self._scope.signal)
            used = summary.usage
            return summary
        except SummaryFailed as failed:
            used = failed.usage or Usage()
            _log.warning("compaction skipped: %s", failed)
            return None
        finally:
            if budget is not None:
                budget.settle(reservation, used, turn=False, grows=False)


async def compact_now(
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal,
    stream_fn: StreamFn,
    emit: EventEmit,
) -> CompactionNotice | None:
    """A compaction asked for outside a run (``agent.compact()``): the same steps, with a
    scope that appends nothing and runs no tools."""

    def no_pool() -> ThreadPoolExecutor:
        raise RuntimeError("a compaction runs no tools")

    scope = RunScope(context, config, signal, stream_fn, emit, context.messages.append, no_pool)
    gate = config.budget_gate  # a gate the caller shares (a cell's) pays for it too
    budget = RunBudget(gate, config, scope) if gate is not None else None
    compactor = Compactor(config.compaction, scope, budget=budget, reset_view=lambda: None)
    return await compactor.compact("manual")
