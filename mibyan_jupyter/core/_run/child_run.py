"""Running one delegated child and shaping what it did into the parent's tool result.

Why the child runs in a task of its own: when the parent is stopped, the tool batch cancels
the ``delegate_task`` call's task; a child awaited in that same task would be torn down by
the cancellation mid-``await``, and its partial work lost. Here the parent's abort (its
signal's listener, and the cancellation of the call) becomes the child's own ``abort()``, the
child closes its run the ordinary way (its stream cancelled, every event closed, "aborted"),
and the tool returns what it had as "stopped" (core/delegation.py). A child that does not
close within the grace period is cancelled outright.

The task is created in a copy of the caller's context with ``task_id_var`` set, so the
child's tool calls (async ones in the child's tasks, sync ones in its pool threads, which
run in a copy of that context) see the child's id as their task id.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mibyan_jupyter.core.conversation import final_text
from mibyan_jupyter.core.events import AgentEvent, AgentStart
from mibyan_jupyter.core.messages import AssistantMessage, Message
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import ToolResult, task_id_var

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.budget_gate import BudgetGate

STOPPED_BEFORE_START = "stopped before it started"


@dataclass(frozen=True, slots=True)
class Ending:
    """How a child's run ended: its end reason (``None``: it never ran), the messages it
    added, the error it raised (if any), and the abort reason when it was stopped."""

    reason: str | None
    messages: tuple[Message, ...] = ()
    error: BaseException | None = None
    stopped: str | None = None
    seconds: float = 0.0


async def run_child(
    agent: Agent, goal: str, signal: AbortSignal, task_id: str, grace: float
) -> Ending:
    """Run ``agent`` on ``goal`` until it ends; the parent's ``signal`` aborts it. Returns
    (never raises, also when the calling task is cancelled: see the module's docstring)."""
    if signal.aborted:
        return Ending(None, stopped=signal.reason or STOPPED_BEFORE_START)
    began = time.monotonic()
    stopped: list[str] = []

    def stop(reason: str | None = None) -> None:
        stopped.append(reason or signal.reason or "the parent agent was stopped")
        agent.abort(stopped[0])

    def on_start(event: AgentEvent) -> None:  # an abort before the child's run had begun
        if isinstance(event, AgentStart) and stopped:
            agent.abort(stopped[0])

    unsubscribe = agent.subscribe(on_start)
    context = contextvars.copy_context()
    context.run(task_id_var.set, task_id)
    task = asyncio.get_running_loop().create_task(agent.prompt(goal), context=context)
    remove = signal.add_listener(stop)
    try:
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            stop("the parent's tool call was cancelled")
            await _wind_down(task, grace)
    finally:
        remove()
        unsubscribe()
    return replace(_ending(agent, task, stopped), seconds=time.monotonic() - began)


async def _wind_down(task: asyncio.Task[list[Message]], grace: float) -> None:
    """Wait up to ``grace`` seconds for the aborted child to close its run (absorbing the
    further cancellations the tool batch sends meanwhile), then cancel it outright and
    wait as long again; a run that does not end even then is left behind."""
    deadline, cancelled = time.monotonic() + grace, False
    while not task.done():
        left = deadline - time.monotonic()
        if left <= 0:
            if cancelled:
                return
            task.cancel()
            deadline, cancelled = time.monotonic() + grace, True
            continue
        try:
            await asyncio.wait({task}, timeout=left)
        except asyncio.CancelledError:
            continue


def _ending(agent: Agent, task: asyncio.Task[list[Message]], stopped: list[str]) -> Ending:
    reason = agent.state.last_end_reason
    messages = tuple(agent.state.messages)
    stop = stopped[0] if stopped else None
    if not task.done() or task.cancelled():
        return Ending(reason or "aborted", messages, stopped=stop or "cancelled")
    error = task.exception()
    if error is not None:
        return Ending(reason or "error", messages, error=error, stopped=stop)
    return Ending(reason, messages, stopped=stop if reason == "aborted" else None)


# -- the tool result ------------------------------------------------------------------


def refused_result(
    wrong: Iterable[str], never: frozenset[str], allowed: tuple[str, ...]
) -> ToolResult:
    """A call asking for tools a child may not have: refused whole, nothing started."""
    why = [
        f"{name} ({'a sub-agent never gets it' if name in never else 'not one of your tools'})"
        for name in wrong
    ]
    listed = ", ".join(allowed) or "none"
    text = (
        f"delegate_task refused: a sub-agent cannot have {'; '.join(why)}. Its tools are a "
        f"subset of yours: {listed}. Call delegate_task again with tools from that list, or "
        "omit tools to give it all of them."
    )
    details: dict[str, object] = {"child_id": None, "status": "refused", "tools": list(allowed)}
    return ToolResult(content=text, details=details, is_error=True)


def start_failed(child_id: str | None, names: tuple[str, ...], why: Exception | str) -> ToolResult:
    """No child ran: setting it up failed (``on_child``, ``child_approval``), or the call
    had no goal."""
    if isinstance(why, Exception):
        why = f"{child_id} could not be started: {type(why).__name__}: {why}"
    details: dict[str, object] = {"child_id": child_id, "status": "failed", "tools": list(names)}
    return ToolResult(content=why, details=details, is_error=True)


def child_result(
    child_id: str, names: tuple[str, ...], agent: Agent, gate: BudgetGate, ending: Ending
) -> ToolResult:
    """The parent's tool result: the child's answer and one line of usage (content), the
    numbers (details). Failures are one line and an error result."""
    tracker = gate.tracker
    status, is_error, text = _outcome(ending, agent, gate)
    details: dict[str, object] = {
        "child_id": child_id,
        "status": status,
        "end_reason": ending.reason,
        "turns": tracker.turns,
        "max_turns": gate.limits.max_turns,
        "usage": {
            "input_tokens": tracker.input_tokens,
            "output_tokens": tracker.output_tokens,
            "total_tokens": tracker.total_tokens,
        },
        "cost": tracker.cost,
        "seconds": round(ending.seconds, 3),
        "tools": list(names),
    }
    if tracker.unknown_cost:
        details["cost_unknown"] = True
    cost = f"${tracker.cost:.4f}{'+' if tracker.unknown_cost else ''}"
    usage = (
        f"[{child_id}: {status.replace('_', ' ')}; {tracker.turns} turns (limit "
        f"{gate.limits.max_turns}), {tracker.total_tokens} tokens, {cost}]"
    )
    content = f"{text} {usage}" if is_error else f"{text}\n\n{usage}"
    return ToolResult(content=content, details=details, is_error=is_error)


def _outcome(ending: Ending, agent: Agent, gate: BudgetGate) -> tuple[str, bool, str]:
    """``(status, is_error, text)`` of a child's ending."""
    answer = final_text(ending.messages)
    if ending.reason is None:
        return "stopped", True, f"Not started: the parent agent was stopped ({ending.stopped})."
    if ending.error is not None:
        error = ending.error
        return "failed", True, f"The sub-agent failed: {type(error).__name__}: {error}"
    if ending.reason == "aborted":
        text = f"Stopped before it finished ({ending.stopped or 'aborted'})."
        partial = _partial(ending.messages)
        return "stopped", False, f"{text} Its work so far:\n\n{partial}" if partial else text
    if ending.reason == "error":
        why = agent.state.error or _last_error(ending.messages) or "unknown error"
        return "failed", True, f"The sub-agent failed: {_one_line(why)}"
    if ending.reason == "budget_exhausted":
        limit = _limit_reached(gate)
        if not answer:
            return "budget_exhausted", True, f"The sub-agent stopped at {limit}, with no answer."
        return "budget_exhausted", False, f"{answer}\n\n(The sub-agent stopped at {limit}.)"
    return ending.reason, False, answer or "(the sub-agent gave no answer)"


def _partial(messages: Iterable[Message]) -> str:
    """The last texts the child wrote (at most three), in order: what a stopped child had."""
    texts = [m.content for m in messages if isinstance(m, AssistantMessage) and m.content]
    return "\n\n".join(texts[-3:])


def _last_error(messages: Iterable[Message]) -> str | None:
    errors = [m.error_message for m in messages if isinstance(m, AssistantMessage)]
    return next((e for e in reversed(errors) if e), None)


def _limit_reached(gate: BudgetGate) -> str:
    """Which budget stopped the child: its own turns, or one of the parent's caps."""
    own = gate.tracker.exhausted()
    if own == "turns":  # its only own limit; the summary call after it is one more turn
        return f"its own limit of {gate.limits.max_turns} turns"
    if own is not None:
        return f"its limit of {gate.tracker.describe(own)}"
    parent = gate.parent
    while parent is not None:
        name = parent.tracker.exhausted()
        if name is not None:
            return f"the parent's limit of {parent.tracker.describe(name)}"
        parent = parent.parent
    return "the budget it shares with the parent (not enough left for another call)"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
