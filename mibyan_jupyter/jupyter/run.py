"""One ``%%agent`` cell, end to end: options -> model -> session -> tools -> view -> run.

This is the one module that wires the loop, the store and the view together (they only
know the event stream). The input transformer turns the cell into ``await run_cell(...)``,
so the run happens on the kernel's event loop while the cell shows ``[*]``; Approve, Deny and
Stop clicks arrive meanwhile (ipykernel >= 7.4). Stop aborts the run and the cell ends
normally; Kernel > Interrupt aborts it too, keeps the transcript valid and ends the cell with
a one-line :class:`AgentInterrupted`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.approval import ApprovalGate, AutoApprove, PolicyOnly
from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.events import AgentEnd, AgentEvent
from mibyan_jupyter.core.tools import ToolRegistry
from mibyan_jupyter.jupyter.approver import CellApprover, headless_denial
from mibyan_jupyter.jupyter.kernel_tools import (
    UnknownToolGroupError,
    kernel_tools,
    parse_groups,
    risk_note,
)
from mibyan_jupyter.jupyter.models import ChosenModel, choose_model, stream_function
from mibyan_jupyter.jupyter.options import AgentUsageError, CellOptions, Defaults, parse_cell_line
from mibyan_jupyter.jupyter.sessions import open_session
from mibyan_jupyter.jupyter.state import (
    ActiveRun,
    KernelState,
    SessionHandle,
    kernel_state,
    notebook_path,
)
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from mibyan_jupyter.core.approval import ApprovalRequest, Decision
    from mibyan_jupyter.core.signal import AbortSignal


WAKE_S = 0.2
"""The kernel's loop wakes at least this often during a run, so Kernel > Interrupt is
honoured at once even while a model takes its time (measured: without it, the interrupt
waited for the next network event)."""


class AgentInterrupted(Exception):
    """Kernel > Interrupt stopped the run: one red line (and Run All stops here)."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentInterrupted: {self}"]


async def run_cell(prompt: str, line: str = "", *, headless: bool = False) -> None:
    """Run one ``%%agent`` cell. ``headless``: nobody can click (the real cell magic
    called synchronously), so the policy decides approvals at once."""
    from mibyan_jupyter.jupyter.extension import active_defaults

    state = kernel_state()
    if _already_delivered(state, prompt):
        return
    defaults = active_defaults()
    options = parse_cell_line(line, defaults)
    if not prompt.strip():
        raise AgentUsageError("the cell has no prompt: write it on the lines below %%agent")
    chosen = choose_model(options.model)
    stream_fn = stream_function(chosen, options.fallback_models)
    try:
        groups = parse_groups(options.tools)
    except UnknownToolGroupError as error:
        raise AgentUsageError(str(error)) from None
    notebook = notebook_path()
    handle = open_session(state, options, chosen, notebook, stream_fn, defaults)
    running = state.runs.get(handle.session_id)
    if running is not None:
        _queue(running, handle, prompt, options)
        return
    _configure(handle, options, chosen, stream_fn, groups)
    view = AgentView(
        ViewHeader(
            title=handle.title or prompt.strip().splitlines()[0][:80],
            session_id=handle.session_id,
            model=REDACT(chosen.label),
            demo=chosen.demo,
            context_window=chosen.context_window,
        ),
        prompt=prompt,
        risk_note=risk_note,
    )
    view.display()
    await drive(state, handle, view, prompt, options, chosen, headless=headless)


def _already_delivered(state: KernelState, prompt: str) -> bool:
    """A queued cell whose prompt went to a running agent: say where, do not run it again."""
    by_cell = state.delivered.pop(state.cell_id, None) if state.cell_id else None
    delivered = by_cell or state.delivered.pop(prompt, None)
    if delivered is None:
        return False
    from IPython.display import HTML, display

    how = "a steering message" if delivered.mode == "steer" else "a follow-up"
    display(  # type: ignore[no-untyped-call]
        HTML(  # type: ignore[no-untyped-call]
            '<div class="mibyan-queued-note">This prompt was given to the running agent as '
            f"{how} while it worked; its answer is in the cell that was running.</div>"
        )
    )
    return True


def _queue(running: ActiveRun, handle: SessionHandle, prompt: str, options: CellOptions) -> None:
    """The agent of this session is busy (another thread's run): queue, as the view shows."""
    if options.after:
        handle.agent.follow_up(prompt)
        running.view.show_queued(prompt, "follow_up")
    else:
        handle.agent.steer(prompt)
        running.view.show_queued(prompt, "steer")
    print(f"queued for the running agent ({'follow-up' if options.after else 'steering'})")


def _configure(
    handle: SessionHandle,
    options: CellOptions,
    chosen: ChosenModel,
    stream_fn: Any,
    groups: tuple[str, ...],
) -> None:
    """This cell's settings on the session's agent (the next cell may change them)."""
    agent = handle.agent
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    namespace: dict[str, Any] = shell.user_ns if shell is not None else {}
    tools = kernel_tools(
        groups,
        namespace=namespace,
        root=Path.cwd(),
        shell=shell,
        on_interrupt=lambda: agent.abort("interrupted (Kernel > Interrupt)"),
    )
    agent.stream_fn = stream_fn
    agent.state.model = chosen.name
    agent.state.tools = ToolRegistry(tools)
    agent.state.thinking_level = options.thinking  # type: ignore[assignment]
    agent.tool_execution = options.tool_mode  # type: ignore[assignment]
    if options.system_prompt is not None:
        agent.state.system_prompt = options.system_prompt
    agent.budget = BudgetLimits(
        max_turns=options.max_turns,
        max_total_tokens=options.max_tokens,
        max_cost=options.max_cost,
    )


class _HeadlessPolicy:
    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return headless_denial(request)


async def drive(
    state: KernelState,
    handle: SessionHandle,
    view: AgentView,
    prompt: str,
    options: CellOptions,
    chosen: ChosenModel,
    *,
    headless: bool = False,
) -> None:
    """Run the prompt with the view subscribed; always finish the view and the run record."""
    from mibyan_jupyter.jupyter.extension import active_defaults

    loop = asyncio.get_running_loop()
    agent = handle.agent
    if options.approve == "auto":
        approver: Any = AutoApprove()
    elif options.approve == "deny":
        approver = PolicyOnly()
    elif headless:
        approver = _HeadlessPolicy()
    else:
        approver = CellApprover(view, loop, headless_wait=_headless_wait(active_defaults()))
    agent.approval = ApprovalGate(policy=handle.policy, approver=approver)
    outcome: dict[str, str] = {}

    def on_end(event: AgentEvent) -> None:
        if isinstance(event, AgentEnd):
            outcome["reason"] = event.reason

    def stop() -> None:
        outcome["stopped"] = "yes"
        agent.abort("stopped with the Stop button")

    def stop_elsewhere() -> None:  # the view's callback: any thread
        loop.call_soon_threadsafe(stop)

    view.on_stop(stop_elsewhere)
    unsubscribe = [agent.subscribe(on_end), agent.subscribe(view)]
    before = len(agent.state.messages)
    task = loop.create_task(agent.prompt(prompt))
    state.runs[handle.session_id] = ActiveRun(
        handle.session_id, notebook_path(), task, view, time.time(), chosen.label
    )
    interrupted = False
    try:
        try:
            while not task.done():  # short slices: SIGINT is only seen when the loop wakes
                await asyncio.wait({task}, timeout=WAKE_S)
            task.result()
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            current = asyncio.current_task()
            if current is not None:
                while current.cancelling():
                    current.uncancel()
            agent.abort("interrupted (Kernel > Interrupt)")
            await _settle(task)
    finally:
        for undo in unsubscribe:
            undo()
        state.runs.pop(handle.session_id, None)
        try:
            _undeliver_leftovers(state, handle)
        finally:
            if handle.writer.error is not None:
                print(f"mibyan: the session store failed: {handle.writer.error}", file=sys.stderr)
            view.finish(agent.state.messages[before:], status=_status(outcome, interrupted))
    if interrupted:
        raise AgentInterrupted(
            "the run was interrupted (Kernel > Interrupt); the conversation so far is saved"
        )


def _undeliver_leftovers(state: KernelState, handle: SessionHandle) -> None:
    """Prompts queued too late for the run to take them: their cells will run them."""
    from mibyan_jupyter.core.messages import content_text

    steering, follow_ups = handle.agent.queued
    if not steering and not follow_ups:
        return
    handle.agent.clear_queues()
    left = {content_text(getattr(m, "content", "")) for m in (*steering, *follow_ups)}
    for key, delivered in list(state.delivered.items()):
        if delivered.session_id == handle.session_id and delivered.prompt in left:
            del state.delivered[key]


async def _settle(task: asyncio.Task[Any], limit: float = 10.0) -> None:
    """Let an aborted run close its events and records; give up after ``limit`` seconds."""
    try:
        await asyncio.wait_for(asyncio.shield(task), limit)
    except (asyncio.CancelledError, KeyboardInterrupt, TimeoutError):
        task.cancel()
    except Exception:
        pass  # reported through the task's exception below / the view


def _status(outcome: dict[str, str], interrupted: bool) -> str:
    if interrupted:
        return "interrupted"
    if "stopped" in outcome:
        return "stopped"
    reason = outcome.get("reason", "error")
    if reason == "completed":
        return "completed"
    if reason == "budget_exhausted":
        return "budget_exhausted"
    if reason == "aborted":
        return "stopped"
    return "error"


def _headless_wait(defaults: Defaults) -> float:
    return float(getattr(defaults, "headless_wait", 2.0))
