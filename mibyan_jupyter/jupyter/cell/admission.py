"""The admin policy on one ``%%agent`` cell: admitted, narrowed, or refused in one line.

Why here and once: every setting an honest user has (``--model``, ``--approve auto``,
``%config AgentMagics.*``, their own config files, ``MIBYAN_APPROVE``) has become the
cell's :class:`~mibyan_jupyter.jupyter.cell.cell_plan.CellPlan` by the time
``plan_from_options`` returns, so :func:`admit` sees them all and the policy wins over each
(docs/architecture.md, "Admin policy"). It refuses (exam mode, an untrusted policy, a model
not allowed, a daily cap used up) with a :class:`PolicyRefusal`, one red line; it narrows
(tool groups turned off, ``--approve auto`` not allowed, the cell's budget under what is
left of the day's cap) with one printed line each. Every refusal and narrowing is an audit
row, and so is a change of the policy files.

This is a convenience for honest users: code in the kernel can bypass it. The guarantees
are the database's row-level security and the spending proxy.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.budget_gate import BudgetGate, BudgetStop
from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.policy.files import LoadedPolicy, load_policy
from mibyan_jupyter.policy.model import AdminPolicy
from mibyan_jupyter.store import audit
from mibyan_jupyter.store.conn import Conn
from mibyan_jupyter.store.usage import day_start, reset_text, spent_since

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.view import AgentView

_log = logging.getLogger(__name__)
_CAPPED: weakref.WeakKeyDictionary[BudgetGate, dict[str, str]] = weakref.WeakKeyDictionary()
"""The limits of a cell's gate that the admin's daily cap set: name -> the cap in words."""


class PolicyRefusal(AgentUsageError):
    """The admin policy refuses the cell: one line naming the rule (and, for a cap, its
    value and when it resets)."""


AUDIT_WAIT_S = 1.0
"""How long a cell waits for its audit row: the write runs on a thread of its own, so a
locked database never holds the kernel's event loop longer (docs/architecture.md, "Store")."""


def _off_loop(step: Callable[[Conn, str], None], what: str) -> None:
    """Run ``step`` in its own transaction on a worker thread; best effort (logged). It is
    given the store's user, whose rows they are (the login role on the team store)."""
    from mibyan_jupyter.jupyter.state import kernel_state
    from mibyan_jupyter.store.db import StoreError

    def write() -> None:
        try:
            db = kernel_state().store().db
            with db.transaction() as conn:
                step(conn, db.user)
        except StoreError as error:
            _log.warning("%s was not recorded: %s", what, error)

    worker = threading.Thread(target=write, name="mibyan-audit", daemon=True)
    worker.start()
    worker.join(AUDIT_WAIT_S)


def _write(kind: audit.AuditKind, detail: dict[str, Any], session_id: str | None = None) -> None:
    """One audit row (see :func:`_off_loop`)."""
    _off_loop(
        lambda conn, user: audit.record(conn, kind, detail, session_id=session_id, user=user), kind
    )


def note_policy_change(loaded: LoadedPolicy) -> None:
    """An audit row when the policy files differ from those last recorded here."""

    def step(conn: Conn, user: str) -> None:
        last = audit.last_policy_digest(conn)
        if (last or "") != loaded.digest and not (last is None and loaded.policy is None):
            detail = {"digest": loaded.digest, "sources": list(loaded.sources)}
            audit.record(conn, "policy_change", detail, user=user)

    _off_loop(step, "the policy change")


def refuse(kind: audit.AuditKind, line: str, **detail: Any) -> PolicyRefusal:
    _write(kind, {"line": line, **detail})
    return PolicyRefusal(line)


def ensure_allowed() -> AdminPolicy | None:
    """The policy in force (``None``: none), or :class:`PolicyRefusal` when the agent is
    off (an untrusted or invalid policy, exam mode): for anything that calls the model
    without a cell plan (``%agent compact``)."""
    loaded = load_policy()
    if loaded.policy is None and not loaded.problems:
        return None
    note_policy_change(loaded)
    if loaded.problems:
        more = f" (and {len(loaded.problems) - 1} more)" if len(loaded.problems) > 1 else ""
        raise refuse(
            "policy_denial",
            f"the agent is off: {loaded.problems[0]}{more}; only root may write the admin "
            "policy, so ask your admin to fix it",
            problems=list(loaded.problems),
        )
    policy = loaded.policy
    assert policy is not None
    if policy.exam.enabled:
        raise refuse("exam_refusal", f"exam mode: {policy.exam.message}")
    return policy


def admit(plan: CellPlan) -> CellPlan:
    """``plan`` under the admin policy in force (unchanged when there is none)."""
    policy = ensure_allowed()
    if policy is None:
        return plan
    _check_models(plan, policy)
    plan = _narrow(plan, policy)
    return _capped(plan, policy)


def _check_models(plan: CellPlan, policy: AdminPolicy) -> None:
    from mibyan_jupyter.jupyter.cell.models import choose_model

    chain = [plan.model, *(choose_model(name) for name in plan.options.fallback_models)]
    for chosen in chain:
        if chosen.demo or chosen.spec is None:
            continue  # the demo model costs nothing and reaches no server
        spec = chosen.spec
        why = policy.models.refusal(chosen.label, spec.provider, spec.base_url)
        if why is not None:
            raise refuse("policy_denial", f"the admin policy refuses this cell: {why}")


def _say(line: str) -> None:
    print(f"mibyan: {line}", file=sys.stderr)


def _narrow(plan: CellPlan, policy: AdminPolicy) -> CellPlan:
    """Tool groups turned off and ``--approve auto`` refused, each said in one line."""
    off = [group for group in plan.groups if policy.tools.is_disabled(group)]
    if off:
        line = f"the admin policy turns off tool group(s) {', '.join(off)}; this cell runs without them"
        _write("policy_denial", {"line": line, "groups": off})
        _say(line)
        plan = replace(plan, groups=tuple(g for g in plan.groups if g not in off))
    if plan.options.approve == "auto" and not policy.approval.allow_auto_approve:
        line = "the admin policy does not allow --approve auto (nor MIBYAN_APPROVE=auto); tools ask"
        _write("policy_denial", {"line": line, "approve": "auto"})
        _say(line)
        plan = replace(plan, options=replace(plan.options, approve="ask"))
    return plan


def _capped(plan: CellPlan, policy: AdminPolicy) -> CellPlan:
    """The cell's budget under what is left of the user's daily caps; refused when none is."""
    from mibyan_jupyter.jupyter.state import kernel_state

    db = kernel_state().store().db
    user = db.user  # the login role on the team store (docs/architecture.md, "Admin policy")
    caps = policy.caps_for(user)
    if caps.daily_cost_per_user is None and caps.daily_tokens_per_user is None:
        return plan
    spent = spent_since(db.conn, user, day_start())
    budget, capped = plan.budget, {}
    for name, cap, used, field in (
        ("cost", caps.daily_cost_per_user, spent.cost, "max_cost"),
        ("total_tokens", caps.daily_tokens_per_user, spent.tokens, "max_total_tokens"),
    ):
        if cap is None:
            continue
        what = _cap_words(name, cap)
        left = cap - used
        if left <= 0 or (name == "total_tokens" and left < 1):
            used_text = f"${used:.2f}" if name == "cost" else f"{used:,}"
            line = f"{what} is used up ({used_text} today); it resets at {reset_text()}"
            raise refuse("cap_hit", line, limit=name, value=cap, used=used)
        own = getattr(budget, field)
        if own is None or left < own:
            budget = replace(budget, **{field: left if name == "cost" else int(left)})  # type: ignore[arg-type]
            capped[name] = what
    if not capped:
        return plan
    gate = BudgetGate(budget)
    _CAPPED[gate] = capped
    return replace(plan, budget=budget, gate=gate)


def _cap_words(name: str, cap: float) -> str:
    """``your daily cost cap ($1.00, admin policy)``."""
    if name == "cost":
        return f"your daily cost cap (${cap:.2f}, admin policy)"
    return f"your daily token cap ({int(cap):,} tokens, admin policy)"


def capped_budget_hook(plan: CellPlan, hook: Any) -> Callable[[BudgetStop], Any] | Any:
    """The cell's ``on_budget_exhausted``, except that a limit the admin's daily cap set is
    never raised by "Continue": the run summarizes, and the student reads which cap, its
    value and when it resets (an audit row records the hit)."""
    capped = _CAPPED.get(plan.gate)
    if not capped:
        return hook

    async def on_exhausted(stop: BudgetStop) -> str:
        what = capped.get(stop.name)
        if what is None:
            if hook is None:
                return "summarize"
            answer = hook(stop)
            return str(await answer) if hasattr(answer, "__await__") else str(answer)
        line = f"{what} is reached; it resets at {reset_text()}"
        _write("cap_hit", {"line": line, "limit": stop.name, "text": stop.text})
        _say(line)
        return "summarize"

    return on_exhausted


def reviewable_line() -> str | None:
    """What the student is told when the admin policy makes conversations reviewable."""
    loaded = load_policy()
    if loaded.policy is None or not loaded.policy.review.reviewable:
        return None
    return "your instructors can review this conversation (the admin policy says so)"


_told: set[str | None] = set()


def tell_reviewable(view: AgentView | None, session_id: str | None) -> None:
    """Say that the conversation is reviewable: in the live view's header at every cell,
    and once per session in the cell's output (which stays in the saved notebook)."""
    line = reviewable_line()
    if line is None:
        return
    if view is not None:
        view.mark_reviewable(line[0].upper() + line[1:])  # the view's header says it
    if session_id not in _told:
        _told.add(session_id)
        _say(line)
        if session_id is not None:
            _remember_reviewable(session_id, line)


def _remember_reviewable(session_id: str, line: str) -> None:
    """Record the line in the session's config, so its exports say it was reviewable
    (export/render.py ``header``); best effort, off the loop like an audit row."""
    from mibyan_jupyter.jupyter.state import kernel_state
    from mibyan_jupyter.store.db import StoreError
    from mibyan_jupyter.store.records import record_settings

    def write() -> None:
        try:
            record_settings(kernel_state().store().db, session_id, {"reviewable": line})
        except StoreError as error:
            _log.warning("the reviewable mark was not recorded: %s", error)

    worker = threading.Thread(target=write, name="mibyan-reviewable", daemon=True)
    worker.start()
    worker.join(AUDIT_WAIT_S)


__all__ = [
    "PolicyRefusal",
    "admit",
    "capped_budget_hook",
    "ensure_allowed",
    "reviewable_line",
    "tell_reviewable",
]
