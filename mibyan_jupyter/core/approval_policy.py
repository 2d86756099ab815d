"""The approval policy: pure allow / deny / ask decisions, no I/O and no waiting.

Kept apart from :mod:`.approval` (the approvers and the gate that asks them) because it is
the part configuration writes: rules (tool-name and argument globs) and remembered
decisions, ``session`` (until the agent is gone) and ``always`` (persisted by whoever
listens to ``on_always``; the store writes them only from a click or a user's cell,
docs/architecture.md, "Approvals the agent cannot grant itself").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Action: TypeAlias = Literal["allow", "deny", "ask"]
Scope: TypeAlias = Literal["once", "session", "always"]


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """``tool`` and each ``args`` value are shell-style globs (``run_*``, ``*rm -rf*``);
    an argument glob matches the argument's string form."""

    tool: str
    action: Action
    args: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""

    def matches(self, tool_name: str, args: Mapping[str, Any]) -> bool:
        if not fnmatch.fnmatchcase(tool_name, self.tool):
            return False
        return all(
            key in args and fnmatch.fnmatchcase(str(args[key]), pattern)
            for key, pattern in self.args.items()
        )


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    action: Action
    reason: str
    source: Literal["rule", "session", "always", "default"]


@dataclass
class ApprovalPolicy:
    """Pure decisions. Order: deny rules, remembered decisions (always, then session),
    other rules (first match), then the default by the tool's side-effect hint."""

    rules: list[ApprovalRule] = field(default_factory=list)
    side_effects_default: Action = "ask"
    read_only_default: Action = "allow"
    always: dict[str, bool] = field(default_factory=dict)
    session: dict[str, bool] = field(default_factory=dict)
    on_always: Callable[[str, bool], None] | None = None
    """Called when an "always" decision is made, so a store can persist it."""

    def decide(
        self, tool_name: str, args: Mapping[str, Any], *, side_effects: bool
    ) -> PolicyDecision:
        for rule in self.rules:
            if rule.action == "deny" and rule.matches(tool_name, args):
                return PolicyDecision("deny", rule.reason or f"a rule denies {rule.tool}", "rule")
        for source, remembered in (("always", self.always), ("session", self.session)):
            if tool_name in remembered:
                approved = remembered[tool_name]
                if source == "always":  # saved: by a click or a user's cell (store)
                    verb = "allows" if approved else "denies"
                    reason = f"a saved 'always' rule {verb} {tool_name}"
                else:
                    verb = "approved" if approved else "denied"
                    reason = f"the user {verb} {tool_name} for this session"
                return PolicyDecision(
                    "allow" if approved else "deny",
                    reason,
                    source,  # type: ignore[arg-type]
                )
        for rule in self.rules:
            if rule.matches(tool_name, args):
                return PolicyDecision(rule.action, rule.reason or f"rule for {rule.tool}", "rule")
        if side_effects:
            return PolicyDecision(self.side_effects_default, "the tool has side effects", "default")
        return PolicyDecision(self.read_only_default, "the tool is read-only", "default")

    def remember(self, tool_name: str, approved: bool, scope: Scope) -> None:
        if scope == "session":
            self.session[tool_name] = approved
        elif scope == "always":
            self.always[tool_name] = approved
            if self.on_always is not None:
                self.on_always(tool_name, approved)

    def set_decision(
        self, tool_name: str, action: Action, scope: Literal["session", "always"] = "always"
    ) -> None:
        """Replace what is remembered for ``tool_name``: forget it in both scopes, then
        remember ``allow``/``deny`` in ``scope`` (``ask``: only forget). Unlike
        :meth:`remember`, ``on_always`` is not called: whoever sets a decision by hand (a
        ``%agent policy`` command shared by several sessions) persists it once itself."""
        self.reset(tool_name)
        if action != "ask":
            target = self.session if scope == "session" else self.always
            target[tool_name] = action == "allow"

    def reset(self, tool_name: str | None = None) -> None:
        """Forget remembered decisions, of ``tool_name`` or of every tool (rules stay)."""
        if tool_name is None:
            self.session.clear()
            self.always.clear()
            return
        self.session.pop(tool_name, None)
        self.always.pop(tool_name, None)

    def remembered(self, scope: Literal["session", "always"]) -> dict[str, bool]:
        """A copy of the remembered decisions of ``scope``: tool -> approved."""
        return dict(self.session if scope == "session" else self.always)
