"""One ``%%agent`` cell, end to end: plan -> session -> view -> run.

This is the one module that wires the loop, the store and the view together (they only
know the event stream). The input transformer turns the cell into ``await run_cell(...)``,
so the run happens on the kernel's event loop while the cell shows ``[*]``; Approve, Deny and
Stop clicks arrive meanwhile (ipykernel >= 7.4). Stop aborts the run and the cell ends
normally; Kernel > Interrupt aborts it too, keeps the transcript valid and ends the cell with
a one-line :class:`AgentInterrupted` (docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.cell.approver import approval_gate
from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.context import flush_after_run, session_results
from mibyan_jupyter.jupyter.cell.failures import (
    AgentFailed,
    AgentInterrupted,
    failure_line,
    internal_line,
)
from mibyan_jupyter.jupyter.cell.options import CellOptions, parse_cell_line
from mibyan_jupyter.jupyter.cell.plan import configure_agent, plan_from_options, session_config
from mibyan_jupyter.jupyter.cell.queued import (
    QueueMode,
    already_delivered,
    give_to_running,
    undeliver_leftovers,
)
from mibyan_jupyter.jupyter.cell.run_parts import HeaderFollower, RunMessages, await_run, uncancel
from mibyan_jupyter.jupyter.cell.sessions import claim_session, open_session, user_facing
from mibyan_jupyter.jupyter.cell.tool_sources import prepare_sources
from mibyan_jupyter.jupyter.kernel_tools import risk_note
from mibyan_jupyter.jupyter.kernel_tools.live import LIVE, STOPS
from mibyan_jupyter.jupyter.state import (
    ActiveRun,
    KernelState,
    SessionHandle,
    kernel_state,
    notebook_path,
)
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.store.records import record_settings
from mibyan_jupyter.store.resume import take_repair_report

if TYPE_CHECKING:
    from mibyan_jupyter.store.session_queries import SessionInfo


async def run_cell(prompt: str, line: str = "", *, headless: bool = False) -> None:
    """Run one ``%%agent`` cell. ``headless``: nobody can click (the real cell magic
    called synchronously), so the policy decides approvals at once."""
    state = kernel_state()
    if already_delivered(state, prompt):
        return
    notebook = notebook_path()
    options = parse_cell_line(line, state.defaults)
    # Store reads and writes wait for SQLite's lock on a worker thread, never on the kernel's
    # loop (docs/architecture.md, "Store").
    continued = await asyncio.to_thread(session_to_continue, state, options, notebook)
    settings = continued.settings if continued is not None else None
    plan = plan_from_options(prompt, options, state.defaults, headless=headless, session=settings)
    handle = await open_session(state, plan, notebook)
    if continued is None:  # a new session records what it runs with, for its resumes
        await asyncio.to_thread(
            record_settings, state.store().db, handle.session_id, session_config(plan)
        )
    report = take_repair_report(handle.agent)
    if report:
        print("\n".join(f"mibyan: repaired on load: {text}" for text in report.lines()))
    running = state.running(handle.session_id)
    if running is not None:  # the agent of this session is busy (another thread's run)
        mode: QueueMode = "follow_up" if plan.options.after else "steer"
        give_to_running(handle.agent, running.view, prompt, mode)
        print(f"queued for the running agent ({'follow-up' if plan.options.after else 'steering'})")
        return
    view = new_view(handle, plan, prompt)
    view.display()
    await drive(state, handle, view, prompt, plan)


def session_to_continue(
    state: KernelState, options: CellOptions, notebook: str | None
) -> SessionInfo | None:
    """The stored session this cell will continue (``None``: it starts a new one), read
    before the plan so the plan can take the session's model and settings."""
    from mibyan_jupyter.store.db import StoreError
    from mibyan_jupyter.store.session_queries import by_id

    target = options.session
    try:
        if target is None:
            current = state.current_session(notebook)
            if current is None or state.session(current) is None:
                return None
            return by_id(state.store().db, current)  # this kernel's: no sweep needed
        if target == "new":
            return None
        return state.store().resolve(target)  # None: no session yet (open_session says so)
    except StoreError as error:
        raise user_facing(error) from None


def new_view(handle: SessionHandle, plan: CellPlan, prompt: str) -> AgentView:
    """The cell's live view; its header names the plan's model, the one that answers."""
    model = plan.model
    return AgentView(
        ViewHeader(
            title=handle.title or prompt.strip().splitlines()[0][:80],
            session_id=handle.session_id,
            model=REDACT(model.label),
            demo=model.demo,
            context_window=model.context_window,
        ),
        risk_note=risk_note,
    )


async def drive(
    state: KernelState, handle: SessionHandle, view: AgentView, prompt: str, plan: CellPlan
) -> None:
    """Make this kernel the session's one writer (asking on the view when another kernel
    holds it), then run the prompt with the view subscribed; always finish the view."""
    claimed = await _claim(state, handle, view, plan)
    if claimed is not None:
        await _run(state, claimed, view, prompt, plan)


async def _claim(
    state: KernelState, handle: SessionHandle, view: AgentView, plan: CellPlan
) -> SessionHandle | None:
    """The handle to run with (``None``: the user cancelled, the view is finished). What
    happened to the session (a fork, a take-over, the store recovering between cells) is
    said in one line each."""
    from mibyan_jupyter.store.db import StoreError

    try:
        claim = await claim_session(state, handle, view, plan)
    except StoreError as error:
        view.finish([], status="error")
        raise user_facing(error) from None
    except (asyncio.CancelledError, KeyboardInterrupt):
        uncancel()
        view.finish([], status="interrupted")
        raise AgentInterrupted("interrupted (Kernel > Interrupt) before the run began") from None
    _tell(view, claim.lines)
    if claim.handle is None:
        view.finish([], status="cancelled")
        return None
    _tell(view, claim.handle.writer.take_news())
    return claim.handle


def _tell(view: AgentView, lines: list[str]) -> None:
    """One line per thing the user must know about the session's store: in the cell's
    output (it stays in the saved notebook) and on the live view."""
    for line in lines:
        print(f"mibyan: {line}", file=sys.stderr)
        view.show_notice(line, level="warning")


async def _run(
    state: KernelState, handle: SessionHandle, view: AgentView, prompt: str, plan: CellPlan
) -> None:
    """Run the prompt with the view subscribed; always finish the view and the run record."""
    loop = asyncio.get_running_loop()
    agent, writer = handle.agent, handle.writer
    results = session_results(state.store().db, handle.session_id, handle.writer)
    try:  # an MCP folder file's trust card, the servers' start (tool_sources.py)
        await prepare_sources(plan, view)
    except (asyncio.CancelledError, KeyboardInterrupt):
        uncancel()
        view.finish([], status="interrupted")
        raise AgentInterrupted("interrupted (Kernel > Interrupt) before the run began") from None
    configure_agent(
        agent,
        plan,
        approval_gate(plan, handle.policy, view, loop),
        view=view,
        notebook=notebook_path(),
        results=results,
        on_usage=writer.bill,
        handle=handle,
    )
    view.read_results_from(results)  # a spilled result's card loads its full text
    follower = HeaderFollower(view, loop)
    stop_following = writer.on_switch(follower)
    stopped = False
    told = 0

    def stop() -> None:
        nonlocal stopped
        stopped = True
        agent.abort("stopped with the Stop button")

    def stop_elsewhere() -> None:  # the view's callback: any thread
        loop.call_soon_threadsafe(stop)
        STOPS.request_stop()  # code blocking the loop: interrupt it (kernel_tools/live.py)

    def store_news(_event: object) -> None:  # the writer failed, recovered, lost the lease
        nonlocal told
        news = writer.take_news()
        told += len(news)
        _tell(view, news)

    added = RunMessages(agent)
    view.on_stop(stop_elsewhere)
    unsubscribe = [agent.subscribe(view), agent.subscribe(store_news), agent.subscribe(added)]
    STOPS.take_interrupts()  # count this run's only
    detach_live = LIVE.attach(view.tool_output)  # tools' output to their cards, live
    task = loop.create_task(agent.prompt(prompt))
    state.begin_run(
        ActiveRun(handle.session_id, notebook_path(), task, view, time.time(), plan.model.label)
    )
    interrupted = False
    internal: Exception | None = None
    try:
        interrupted = await await_run(task, agent)
        interrupted = STOPS.take_interrupts() > 0 or interrupted  # in a tool: red line too
    except Exception as error:  # a bug of ours inside the run: one line, not a traceback
        internal = error
    finally:
        detach_live()
        stop_following()  # the view follows the session only during its run
        for undo in unsubscribe:
            undo()
        state.end_run(handle.session_id)
        try:
            undeliver_leftovers(state, handle)
        finally:
            store_news(None)
            if writer.error is not None and not told:
                _tell(view, [f"the session store failed: {writer.error}"])
            status = _status(agent.state.last_end_reason, stopped=stopped, interrupted=interrupted)
            view.finish(added.messages(), status=status)
    if not interrupted:  # memory is flushed when a run changed something ("Memory")
        kept = await flush_after_run(
            plan, agent.state.last_end_reason, added.messages(), on_usage=writer.bill
        )
        if kept:
            print(f"mibyan: remembered {len(kept)} fact(s): " + "; ".join(kept))
    if interrupted:
        raise AgentInterrupted(
            "the run was interrupted (Kernel > Interrupt); the conversation so far is saved"
        )
    if internal is not None:
        logging.getLogger(__name__).error("the run failed", exc_info=internal)  # the log keeps it
        raise AgentFailed(internal_line(internal))
    if agent.state.last_end_reason == "error":  # a provider or internal error: Run All stops
        raise AgentFailed(failure_line(added.messages()))


def _status(end_reason: str | None, *, stopped: bool, interrupted: bool) -> str:
    """The view's final status from the agent's own record of how the run ended; Stop and
    Kernel > Interrupt both abort, and are told apart by who asked."""
    if interrupted:
        return "interrupted"
    if stopped:
        return "stopped"
    if end_reason in ("completed", "budget_exhausted"):
        return end_reason
    if end_reason == "aborted":
        return "stopped"
    return "error"
