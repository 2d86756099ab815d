"""Carrying on after a restart: load a session, repair its transcript, rebuild the Agent.

A session continues as it was: the agent gets the session's model and recorded settings
(its system prompt, thinking level, tool mode, budgets; :class:`SessionSettings`) unless
the caller overrides them, and the repaired transcript. Loading is one query and one
validation (:mod:`.loading`); repairing is one pass (:mod:`.repair`); what either had to
change is a :class:`RepairReport` the caller shows the user (``%agent resume`` and the
first cell of a resumed session do), never an error that refuses the session.

A compressed session continues in its newest ``compression`` descendant, so that is the
one loaded (only the live tail of the lineage is read); a pending approval is reported by
:func:`pending_approvals` so the UI can show it again after a restart.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.core.agent import Agent
from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.core.stream import StreamFn
from mibyan_jupyter.core.transcript import TranscriptError
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.loading import read_messages
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.repair import (
    MISSING_PROMPT,
    NOT_RUN,
    UNKNOWN_OUTCOME,
    RepairReport,
    drop_until_valid,
    repair,
    repair_transcript,
)
from mibyan_jupyter.store.session_queries import SessionSettings
from mibyan_jupyter.store.sessions import SessionInfo, SessionStore

__all__ = [
    "MISSING_PROMPT",
    "NOT_RUN",
    "UNKNOWN_OUTCOME",
    "History",
    "PendingApproval",
    "RepairReport",
    "load_history",
    "load_transcript",
    "pending_approvals",
    "repair",
    "repair_transcript",
    "resume_agent",
    "take_repair_report",
]

_REPORTS: weakref.WeakKeyDictionary[Agent, RepairReport] = weakref.WeakKeyDictionary()
"""The repairs of the load that filled an agent, until someone shows them (the agent
object is what every caller holds; the core knows nothing of the store)."""


@dataclass(frozen=True, slots=True)
class History:
    """A stored session's transcript, repaired and ready to continue, with what was done."""

    info: SessionInfo
    messages: list[Message]
    repairs: RepairReport


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call that was waiting for the user's decision when its session stopped."""

    session_id: str
    call_id: str
    name: str
    arguments: str
    """The arguments as the model produced them (JSON text)."""
    reason: str | None
    requested_at: float | None


def _resolve(store: SessionStore, session_id: str, notebook_path: str | None) -> SessionInfo:
    """``"last"`` (of the notebook, when given) or an id/prefix, then the newest
    compression descendant: the session that continues the conversation (one sweep for
    dead owners, in :meth:`SessionStore.resolve`)."""
    found = store.resolve(session_id, notebook=notebook_path)
    if found is None:
        where = f" for {notebook_path}" if notebook_path else ""
        raise StoreError(f"no session to resume{where}")
    return found


def load_transcript(store: SessionStore, session_id: str) -> list[Message]:
    """The stored messages (unrepaired, for display) of the session that continues
    ``session_id`` (or ``"last"``), following compression lineage."""
    return load_messages(store.db, _resolve(store, session_id, None).id)


def pending_approvals(store: SessionStore, session_id: str) -> list[PendingApproval]:
    """Tool calls still awaiting approval (and without a result) in the session that
    continues ``session_id``, in the order they were asked."""
    return _pending(store, _resolve(store, session_id, None).id)


def _pending(store: SessionStore, session_id: str) -> list[PendingApproval]:
    rows = store.db.conn.execute(
        "SELECT call_id, name, arguments, reason, requested_at FROM tool_calls t"
        " WHERE t.session_id = ? AND t.status = 'awaiting_approval' AND NOT EXISTS"
        " (SELECT 1 FROM messages m WHERE m.session_id = t.session_id"
        "  AND m.tool_call_id = t.call_id)"
        " ORDER BY coalesce(t.requested_at, t.started_at), t.rowid",
        (session_id,),
    )
    return [PendingApproval(session_id, *row) for row in rows]


def load_history(
    store: SessionStore, session: str | SessionInfo = "last", *, verify: bool = False
) -> History:
    """The repaired transcript of ``session`` (an id, a prefix, ``"last"``, or a
    :class:`SessionInfo` already resolved: then the store is not read for it again).
    ``verify``: check it against the core's rules even when nothing needed repair (for a
    caller that does not hand it to an ``Agent``, which checks it anyway)."""
    info = session if isinstance(session, SessionInfo) else _resolve(store, session, None)
    stored, row_repairs = read_messages(store.db, info.id)
    waiting = {p.call_id for p in _pending(store, info.id)} if stored else set()
    messages, repairs = repair_transcript(stored, not_run=waiting, verify=verify)
    return History(info, messages, RepairReport(dict(row_repairs)) + repairs)


def remember_repairs(agent: Agent, repairs: RepairReport) -> None:
    """Keep the repairs of ``agent``'s load for :func:`take_repair_report` (when any)."""
    if repairs:
        _REPORTS[agent] = repairs


def take_repair_report(agent: Agent) -> RepairReport | None:
    """What had to be repaired when ``agent``'s transcript was loaded from the store, once:
    whoever shows it to the user takes it (``None``: nothing, or already shown)."""
    return _REPORTS.pop(agent, None)


def settings_options(settings: SessionSettings) -> dict[str, Any]:
    """Agent keyword arguments for the recorded settings (unrecorded ones left out)."""
    options: dict[str, Any] = {}
    if settings.model:
        options["model"] = settings.model
    if settings.system_prompt is not None:
        options["system_prompt"] = settings.system_prompt
    if settings.thinking is not None:
        options["thinking_level"] = settings.thinking
    if settings.tool_mode is not None:
        options["tool_execution"] = settings.tool_mode
    if (settings.max_turns, settings.max_tokens, settings.max_cost) != (None, None, None):
        options["budget"] = BudgetLimits(
            max_turns=settings.max_turns,
            max_total_tokens=settings.max_tokens,
            max_cost=settings.max_cost,
        )
    return options


def resume_agent(
    store: SessionStore,
    session_id: str | SessionInfo = "last",
    *,
    stream_fn: StreamFn,
    notebook_path: str | None = None,
    **agent_kwargs: Any,
) -> tuple[Agent, SessionInfo]:
    """An :class:`Agent` holding the repaired transcript of ``session_id`` (an id, a
    prefix, or ``"last"``: the most recent session, of ``notebook_path`` when given),
    ready for ``prompt()`` or ``continue_()``; with the session it continues.

    The model and settings come from the session (:attr:`SessionInfo.settings`);
    ``agent_kwargs`` (tools, approval, budget, ...) are passed on and win over them. The
    agent has no subscribers: wire the store's writer to it. What was repaired:
    :func:`take_repair_report` of the agent.

    A :class:`SessionInfo` (what :meth:`SessionStore.resolve` returns) is taken as the
    session to continue, as it is: the caller has resolved it, so the store is not read
    for it again (opening a session sweeps for dead owners once, in ``resolve``).
    """
    if not isinstance(session_id, SessionInfo):
        session_id = _resolve(store, session_id, notebook_path)
    history = load_history(store, session_id)
    options = settings_options(history.info.settings)
    options.update(agent_kwargs)
    messages, repairs = history.messages, history.repairs
    try:
        agent = Agent(stream_fn=stream_fn, messages=messages, **options)
    except TranscriptError:  # not foreseen by the repair pass: never refuse the session
        counts: Counter[str] = Counter(repairs.counts)
        messages = drop_until_valid(messages, counts)
        agent = Agent(stream_fn=stream_fn, messages=messages, **options)
        repairs = RepairReport(dict(counts))
    remember_repairs(agent, repairs)
    return agent, history.info
