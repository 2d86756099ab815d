"""The admin policy in ``%agent policy``: every floor in force, one row each, so a student
sees why a rule cannot be changed.

Why in the approval table and not a table of its own: a student who types ``%agent
policy set run_shell allow`` reads the answer there, so the row saying the admin asks
about ``run_shell`` every time belongs next to the saved rule it overrides. Each admin row
ends in ``(admin policy)``; a saved or session rule the floor sets aside says so in its own
row (what :mod:`.approvals` does with it, worded). The rows are read from the same
:func:`~.files.load_policy` the cells obey, so the table cannot promise what a cell then
refuses (docs/architecture.md, "Admin policy").
"""

from __future__ import annotations

from collections.abc import Sequence

from mibyan_jupyter.policy.files import load_policy
from mibyan_jupyter.policy.model import AdminPolicy
from mibyan_jupyter.store.audit import current_user
from mibyan_jupyter.store.conn import Conn
from mibyan_jupyter.store.usage import day_start, reset_text, spent_since

Row = tuple[str, str, str]
"""``(tool or setting, decision, scope)``: the columns of ``%agent policy``."""
MARK = "(admin policy)"
NOTE = (
    " Rows marked (admin policy) come from the admin's policy file, which only root can"
    " change: %agent policy set and reset do not override them."
)


def with_admin_policy(
    rows: Sequence[Row], note: str, conn: Conn, user: str | None = None
) -> tuple[list[Row], str]:
    """``rows`` and ``note`` of ``%agent policy`` with the admin policy's floors (unchanged
    when there is no policy file). ``conn``: the kernel's store, for today's spending;
    ``user``: its user (``db.user``: the login role on the team store)."""
    loaded = load_policy()
    if loaded.problems:
        more = f" (and {len(loaded.problems) - 1} more)" if len(loaded.problems) > 1 else ""
        off = ("the agent", "off", f"{loaded.problems[0]}{more} {MARK}")
        return [*rows, off], note + NOTE
    if loaded.policy is None:
        return list(rows), note
    policy = loaded.policy
    shown = [_floored(row, policy) for row in rows]
    shown += approval_rows(policy) + tool_rows(policy) + cap_rows(policy, conn, user)
    shown += session_rows(policy, user)
    return shown, note + NOTE


def _floored(row: Row, policy: AdminPolicy) -> Row:
    """A saved or session rule as the floor leaves it."""
    tool, decision, scope = row
    if policy.approval.asks_always(tool):
        return tool, decision, f"{scope}; not applied: asked every time {MARK}"
    if scope.startswith("always") and not policy.approval.allow_always_rules:
        return tool, "ignored", f"{scope}; the admin policy allows no always rules {MARK}"
    return row


def approval_rows(policy: AdminPolicy) -> list[Row]:
    """Tools asked every time, and the switches that turn "always" and auto-approval off."""
    floor = policy.approval
    rows = [
        (glob, "ask", f"every time: no --approve auto, no remembered answer {MARK}")
        for glob in floor.always_ask
    ]
    if not floor.allow_always_rules:
        rows.append(("always rules", "off", f"an always click counts for the session {MARK}"))
    if not floor.allow_auto_approve:
        rows.append(("--approve auto", "off", f"tools ask as without it {MARK}"))
    return rows


def tool_rows(policy: AdminPolicy) -> list[Row]:
    """Tool groups turned off, and the models, providers and base URLs allowed."""
    rows: list[Row] = []
    if policy.tools.disabled:
        groups = ", ".join(policy.tools.disabled)
        rows.append((f"tool groups {groups}", "off", f"no cell gets them {MARK}"))
    models = policy.models
    for what, allowed in (
        ("models", models.allowed),
        ("providers", models.providers),
        ("base URLs", models.base_urls),
    ):
        if allowed:
            rows.append((what, "only " + ", ".join(allowed), f"any other is refused {MARK}"))
    return rows


def cap_rows(policy: AdminPolicy, conn: Conn, user: str | None = None) -> list[Row]:
    """The user's daily caps, what is left of them today, and when they reset."""
    user = user or current_user()
    caps = policy.caps_for(user)
    if caps.daily_cost_per_user is None and caps.daily_tokens_per_user is None:
        return []
    spent = spent_since(conn, user, day_start())
    reset = f"resets at {reset_text()}"
    rows: list[Row] = []
    if caps.daily_cost_per_user is not None:
        left = max(0.0, caps.daily_cost_per_user - spent.cost)
        value = f"${caps.daily_cost_per_user:.2f} a day"
        rows.append(("cost cap", value, f"${left:.2f} left today; {reset} {MARK}"))
    if caps.daily_tokens_per_user is not None:
        left_tokens = max(0, caps.daily_tokens_per_user - spent.tokens)
        value = f"{caps.daily_tokens_per_user:,} tokens a day"
        rows.append(("token cap", value, f"{left_tokens:,} left today; {reset} {MARK}"))
    return rows


def session_rows(policy: AdminPolicy, user: str | None = None) -> list[Row]:
    """Exam mode, review and retention."""
    rows: list[Row] = []
    if policy.exam.enabled:
        rows.append(("exam mode", "on", f"the agent is off: {policy.exam.message} {MARK}"))
    if policy.review.reviewable:
        courses = policy.courses_of(user or current_user())
        who = f"your instructors ({', '.join(courses)})" if courses else "your instructors"
        rows.append(("review", "on", f"{who} can review your conversations {MARK}"))
    if policy.review.retention_days is not None:
        days = policy.review.retention_days
        rows.append(("retention", f"{days} days", f"older sessions are purged {MARK}"))
    return rows
