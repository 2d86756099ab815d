"""Approval of tool calls: a pure policy (:mod:`.approval_policy`, re-exported here), an
async approver, and the gate that joins them.

The policy answers allow / deny / ask from rules (tool-name and argument globs) and from
remembered decisions; only "ask" reaches the :class:`Approver` (the widget's buttons, a
headless policy, a test). Decisions carry a scope, as in Hermes: ``once`` (this call),
``session`` (this tool, until the agent is gone) and ``always`` (this tool, persisted by
whoever listens to ``on_always``). An approver that does not answer within ``timeout``
counts as a denial. A denial reaches the model as an error result that carries the
reason and tells it not to retry the same call.

The calls of one batch are asked at once (``ToolBatch`` asks every call the policy would
ask about before any runs), so the gate may hold several questions, answered in any
order. A decision for the session or always settles the other questions still open about
the same tool, as the policy would have answered them had they been asked after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ._run.waiting import Expired, await_within
from .approval_policy import Action as Action
from .approval_policy import ApprovalPolicy as ApprovalPolicy
from .approval_policy import ApprovalRule as ApprovalRule
from .approval_policy import PolicyDecision as PolicyDecision
from .approval_policy import Scope as Scope
from .events import ApprovalRequested, ApprovalResolved
from .signal import AbortSignal

Answerer: TypeAlias = Literal["user", "policy"]


@dataclass(frozen=True, slots=True)
class Approved:
    """Run the call, with ``override_args`` instead of the model's if given."""

    override_args: Mapping[str, Any] | None = None
    scope: Scope = "once"
    decided_by: Answerer = "user"
    """``policy`` when no person answered (auto-approval, a headless run)."""


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str | None = None
    scope: Scope = "once"
    decided_by: Answerer = "user"


Decision: TypeAlias = Approved | Denied


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    call_id: str
    tool_name: str
    args: Mapping[str, Any]
    reason: str
    """Why the policy asks (the rule's reason, or "side-effecting tool")."""


class Approver(Protocol):
    def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Awaitable[Decision]: ...


class AutoApprove:
    """Approves everything (for trusted tools, scripts and tests)."""

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return Approved(decided_by="policy")


@dataclass(frozen=True)
class DenyAll:
    """Denies everything that needs asking, with a reason the model will see."""

    reason: str = "no one is available to approve this call"

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return Denied(self.reason, decided_by="policy")


class PolicyOnly:
    """No one to ask: "ask" becomes a denial, with the reason recorded (headless runs)."""

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return Denied(
            f"{request.tool_name} needs approval ({request.reason}) and no one can be asked",
            decided_by="policy",
        )


@dataclass(frozen=True, slots=True)
class GateOutcome:
    approved: bool
    args: Mapping[str, Any] | None
    reason: str | None


DecidedBy: TypeAlias = Literal["user", "policy", "rule", "timeout", "abort", "error"]
"""Who decided, as the audit records it: ``user`` a click, ``policy`` a configured mode or
tool rule (``--approve``, headless), ``rule`` a remembered decision ("always" or "for this
session") that matched; the others: no decision was made."""
EmitFn: TypeAlias = Callable[[ApprovalRequested | ApprovalResolved], Awaitable[None]]


@dataclass(slots=True)
class _Asking:
    """One question open at the approver; ``settled`` gets the decision of another call
    of the same tool that was made for the session or always."""

    tool_name: str
    answer: asyncio.Future[Decision]
    settled: asyncio.Future[Decision]


@dataclass
class ApprovalGate:
    """The before-tool-call step the loop runs after argument validation."""

    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    approver: Approver = field(default_factory=PolicyOnly)
    timeout: float | None = None
    _asking: dict[str, _Asking] = field(default_factory=dict, init=False, repr=False)

    def would_ask(self, tool_name: str, args: Mapping[str, Any], *, side_effects: bool) -> bool:
        """Whether :meth:`check` would ask the approver now (the policy's answer is
        "ask"): the tool batch asks every such call of a batch at once."""
        return self.policy.decide(tool_name, args, side_effects=side_effects).action == "ask"

    async def check(
        self,
        call_id: str,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        side_effects: bool,
        emit: EmitFn,
        signal: AbortSignal,
    ) -> GateOutcome:
        """Decide one call. Every ApprovalRequested gets its ApprovalResolved, also when
        the approver fails or times out, or the run is cancelled while it waits."""
        resolved = _Resolved(emit, call_id, tool_name)
        decision = self.policy.decide(tool_name, args, side_effects=side_effects)
        remembered: Scope = decision.source if decision.source in ("session", "always") else "once"
        by: DecidedBy = "rule" if remembered != "once" else "policy"
        if decision.action == "allow":
            if decision.source != "default":
                await resolved(True, by, decision.reason, remembered)
            return GateOutcome(True, None, None)
        if decision.action == "deny":
            await resolved(False, by, decision.reason, remembered)
            return GateOutcome(False, None, decision.reason)
        request = ApprovalRequest(call_id, tool_name, args, decision.reason)
        answer = await self._ask(request, emit, signal, resolved)
        if isinstance(answer, GateOutcome):
            return answer
        self.policy.remember(tool_name, isinstance(answer, Approved), answer.scope)
        if answer.scope != "once":
            self._settle_others(tool_name, answer)
        if isinstance(answer, Approved):
            await resolved(True, answer.decided_by, None, answer.scope)
            return GateOutcome(True, answer.override_args, None)
        await resolved(False, answer.decided_by, answer.reason, answer.scope)
        return GateOutcome(False, None, answer.reason or "the user denied it")

    async def _ask(
        self, request: ApprovalRequest, emit: EmitFn, signal: AbortSignal, resolved: _Resolved
    ) -> Decision | GateOutcome:
        """Ask the approver; a timeout or a failing approver is a denial (resolved here),
        a cancelled run resolves the request before the cancellation goes on."""
        try:
            await emit(
                ApprovalRequested(
                    call_id=request.call_id,
                    name=request.tool_name,
                    args=dict(request.args),
                    reason=request.reason,
                )
            )
            answer = asyncio.ensure_future(
                await_within(self.approver(request, signal), self.timeout)
            )
            asking = _Asking(request.tool_name, answer, asyncio.get_running_loop().create_future())
            self._asking[request.call_id] = asking
            try:
                await asyncio.wait({answer, asking.settled}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._asking.pop(request.call_id, None)
                if not answer.done():
                    answer.cancel()
            if not answer.done():
                return await self._settled(request, asking.settled.result(), resolved)
            return answer.result()
        except asyncio.CancelledError:
            await resolved(False, "abort", "the run was stopped")
            raise
        except Expired:
            reason = f"no answer within {self.timeout:g} s"
            await resolved(False, "timeout", reason)
            return GateOutcome(False, None, reason)
        except Exception as error:
            reason = f"the approval could not be asked ({type(error).__name__}: {error})"
            await resolved(False, "error", reason)
            return GateOutcome(False, None, reason)

    def _settle_others(self, tool_name: str, decision: Decision) -> None:
        """``decision`` (for the session or always) answers the questions still open
        about ``tool_name``."""
        for asking in self._asking.values():
            if asking.tool_name == tool_name and not asking.settled.done():
                asking.settled.set_result(decision)

    @staticmethod
    async def _settled(
        request: ApprovalRequest, decision: Decision, resolved: _Resolved
    ) -> GateOutcome:
        """A question another call's decision answered: resolved as the policy would
        have answered it after that decision (no override arguments carried over)."""
        approved = isinstance(decision, Approved)
        verb = "approved" if approved else "denied"
        scope_text = "always" if decision.scope == "always" else "for this session"
        reason = f"the user {verb} {request.tool_name} {scope_text}"
        await resolved(approved, "rule", reason, decision.scope)  # a remembered decision
        return GateOutcome(approved, None, None if approved else reason)


class _Resolved:
    """Emits the ApprovalResolved of one call."""

    __slots__ = ("call_id", "emit", "tool_name")

    def __init__(self, emit: EmitFn, call_id: str, tool_name: str) -> None:
        self.emit, self.call_id, self.tool_name = emit, call_id, tool_name

    async def __call__(
        self,
        approved: bool,
        decided_by: DecidedBy,
        reason: str | None = None,
        scope: Scope = "once",
    ) -> None:
        await self.emit(
            ApprovalResolved(
                call_id=self.call_id,
                name=self.tool_name,
                approved=approved,
                decided_by=decided_by,
                reason=reason,
                scope=scope,
            )
        )
