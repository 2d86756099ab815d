"""The admin policy's approval floors, on the cell's approval gate.

Two floors (docs/architecture.md, "Admin policy"): tools that are **asked every time**
(``[approval] always_ask``: no ``--approve auto``, no remembered "for this session" or
"always" answer, no saved rule settles them; only a deny rule still denies at once), and
**no "always" rules** (``allow_always_rules = false``: saved rules are left out and an
"always" click counts for the session only). :class:`FlooredPolicy` shares the session's
remembered decisions (the same dicts), so what the session remembers outside the floor
stays as it was; :class:`FloorApprover` sends an always-asked tool to the person (or to the
headless policy, which denies) even when the cell's approver approves everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mibyan_jupyter.core.approval import (
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    Decision,
    PolicyDecision,
    Scope,
)
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.policy.files import load_policy
from mibyan_jupyter.policy.model import ApprovalFloor


class FlooredPolicy(ApprovalPolicy):
    """``base``'s rules and remembered decisions under the admin's floor."""

    floor: ApprovalFloor

    @classmethod
    def over(cls, base: ApprovalPolicy, floor: ApprovalFloor) -> FlooredPolicy:
        policy = cls(
            rules=base.rules,
            side_effects_default=base.side_effects_default,
            read_only_default=base.read_only_default,
            always=base.always if floor.allow_always_rules else {},
            session=base.session,
            on_always=base.on_always if floor.allow_always_rules else None,
        )
        policy.floor = floor
        return policy

    def decide(
        self, tool_name: str, args: Mapping[str, Any], *, side_effects: bool
    ) -> PolicyDecision:
        if self.floor.asks_always(tool_name):
            for rule in self.rules:
                if rule.action == "deny" and rule.matches(tool_name, args):
                    return PolicyDecision(
                        "deny", rule.reason or f"a rule denies {rule.tool}", "rule"
                    )
            return PolicyDecision(
                "ask", f"the admin policy asks about {tool_name} every time", "rule"
            )
        return super().decide(tool_name, args, side_effects=side_effects)

    def remember(self, tool_name: str, approved: bool, scope: Scope) -> None:
        if self.floor.asks_always(tool_name):
            return  # asked every time: nothing is remembered
        if scope == "always" and not self.floor.allow_always_rules:
            scope = "session"
        super().remember(tool_name, approved, scope)


class FloorApprover:
    """``inner`` answers, except about always-asked tools, which go to ``human``."""

    def __init__(self, inner: Approver, human: Approver, floor: ApprovalFloor) -> None:
        self.inner, self.human, self.floor = inner, human, floor

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        floored = self.floor.asks_always(request.tool_name)
        decision = await (self.human if floored else self.inner)(request, signal)
        if floored and decision.scope != "once":  # asked every time: this call only
            return replace(decision, scope="once")
        if decision.scope == "always" and not self.floor.allow_always_rules:
            return replace(decision, scope="session")
        return decision


def admin_floor() -> ApprovalFloor | None:
    """The approval floor of the admin policy in force (``None``: no policy file)."""
    loaded = load_policy()
    return None if loaded.policy is None else loaded.policy.approval
