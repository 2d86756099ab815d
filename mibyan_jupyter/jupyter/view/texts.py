"""Texts the view shows about tool calls, budgets and notices (plain text: the front end
sets them with ``textContent``), kept apart from the event handling so both stay short."""

from __future__ import annotations

import json
import math
from typing import Any

from mibyan_jupyter.core.events import ApprovalResolved, BudgetStatus
from mibyan_jupyter.core.messages import ToolMessage, content_text
from mibyan_jupyter.core.notices import (
    CompactionNotice,
    FallbackNotice,
    NoteNotice,
    RetryNotice,
)
from mibyan_jupyter.export.notices import compaction_text, notes_text
from mibyan_jupyter.export.render import ARGS_LIMIT, RESULT_LIMIT
from mibyan_jupyter.jupyter.view.ops import BarName, BarOp, NoticeOp, ResultOp
from mibyan_jupyter.jupyter.view.spill import spill_info
from mibyan_jupyter.jupyter.view.tool_cards import code_text

SUMMARY_LIMIT = 120
BAR_NAMES: dict[str, BarName] = {"turns": "turns", "total_tokens": "total_tokens", "cost": "cost"}
"""The budgets shown as bars (with "context", which comes from the last reply's usage)."""
_TITLES: dict[BarName, str] = {
    "turns": "turns",
    "total_tokens": "tokens",
    "context": "context",
    "cost": "cost",
}


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first ``limit`` characters of ``text`` and how many were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def args_text(name: str, args: Any) -> str:
    """A call's arguments for reading: the code of ``run_python`` / ``run_shell`` as is,
    else JSON."""
    code = code_text(name, args)
    if code is not None:
        text: str = code
    elif isinstance(args, str):
        text = args
    else:
        try:
            text = json.dumps(args, indent=2, ensure_ascii=False, default=str)
        except ValueError:
            text = repr(args)
    shown, more = clip(text, ARGS_LIMIT)
    return shown if not more else f"{shown}\n… ({more:,} more characters)"


def parsed_args(raw: str) -> Any:
    """The arguments JSON of a finished call, or the raw text when it is not JSON."""
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


def result_op(call_id: str, result: ToolMessage, images: list[str]) -> ResultOp:
    text = content_text(result.content)
    shown, more = clip(text, RESULT_LIMIT)
    first = text.strip().split("\n", 1)[0] if text.strip() else "(empty)"
    summary, cut = clip(first, SUMMARY_LIMIT)
    op = ResultOp(
        op="result",
        id=call_id,
        summary=summary + ("…" if cut else ""),
        text=shown,
        more=more,
        error=result.is_error,
        images=images,
    )
    spilled = spill_info(result)
    if spilled is not None:  # ``text`` is the preview: the card offers the whole (.spill)
        op["spilled"] = spilled[1]
    return op


def outcome_text(event: ApprovalResolved) -> str:
    """``approved by you (for this session)``, ``denied by policy: <reason>``."""
    verb = "approved" if event.approved else "denied"
    who = {
        "user": "you",
        "policy": "policy",
        "rule": "your earlier answer" if event.scope == "session" else "a saved rule",
        "timeout": "timeout",
        "abort": "stop",
    }.get(event.decided_by, event.decided_by)
    scope = {"once": "", "session": " (for this session)", "always": " (always for this tool)"}
    text = f"{verb} by {who}{scope[event.scope]}"
    return f"{text}: {event.reason}" if event.reason else text


def dollars(value: float) -> str:
    """Dollars with cents, and as many more places as a small amount needs to show two
    significant digits: a $0.005 cap is "$0.0050", not "$0.01"."""
    if value <= 0 or value >= 0.01:
        return f"${value:,.2f}"
    places = -math.floor(math.log10(value)) + 1
    return f"${value:.{places}f}"


def bar_op(name: BarName, used: float, limit: float | None, *, unknown: bool = False) -> BarOp:
    """A budget bar. ``unknown`` (cost only): some use had no known price, so what is shown
    is a lower bound ("≥ $X"), or "unknown" when nothing priced was used yet — never a
    plain $0 (docs/architecture.md, "Budgets")."""
    if name == "cost":
        spent = dollars(used)
        if unknown:
            spent = f"≥ {spent}" if used else "unknown"
        label = spent + (f" / {dollars(limit)}" if limit is not None else "")
    else:
        label = f"{used:,.0f}" + (f" / {limit:,.0f}" if limit is not None else "")
    fraction = None if not limit else min(max(used / limit, 0.0), 1.0)
    return BarOp(op="bar", name=name, title=_TITLES[name], label=label, fraction=fraction)


def budget_ops(budgets: tuple[BudgetStatus, ...]) -> list[BarOp]:
    return [
        bar_op(BAR_NAMES[b.name], b.used, b.limit, unknown=b.unknown)
        for b in budgets
        if b.name in BAR_NAMES
    ]


def notice_op(notice: RetryNotice | FallbackNotice | CompactionNotice) -> NoticeOp:
    if isinstance(notice, RetryNotice):
        text = (
            f"Retrying (attempt {notice.attempt} of {notice.max_attempts}) in "
            f"{notice.delay:g} s after {notice.error_kind}: {notice.message}"
        )
        return NoticeOp(op="notice", level="warning", kind="retry", text=text)
    if isinstance(notice, FallbackNotice):
        text = f"Switched from {notice.from_model} to {notice.to_model}: {notice.reason}"
        return NoticeOp(op="notice", level="warning", kind="fallback", text=text)
    return compaction_op(notice)


def compaction_op(notice: CompactionNotice) -> NoticeOp:
    """The compaction's receipt (the same words as the saved transcript's, from
    :mod:`mibyan_jupyter.export.notices`), the summary itself collapsed under it
    (docs/architecture.md, "Context compression")."""
    op = NoticeOp(op="notice", level="info", kind="compaction", text=compaction_text(notice))
    if notice.summary.strip():
        op["detail"] = notice.summary.strip()
    return op


def notes_op(notice: NoteNotice) -> NoticeOp | None:
    """The notes sent with one request, as one notice (never a "You" message): the first
    line of each, the whole notes collapsed under it. ``None``: nothing was sent."""
    parts = notes_text(notice)
    if parts is None:
        return None
    line, full = parts
    op = NoticeOp(op="notice", level="info", kind="notes", text=line)
    op["detail"] = full
    return op
