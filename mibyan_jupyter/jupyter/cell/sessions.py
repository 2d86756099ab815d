"""Which session a cell talks to: this notebook's current one, a new one, the last one, or
one named by id; opened once per kernel and kept, so successive cells are one conversation
and "for this session" approvals hold until the kernel goes.

Store problems (a corrupt, locked or newer database) become one-line errors that name the
file and the fix, raised before anything is sent to a model.

Before a cell's run writes anything, :func:`claim_session` makes this kernel the session's
one writer (its lease; docs/architecture.md, "Store"). When another kernel holds it, the
cell asks on its view (:func:`~mibyan_jupyter.jupyter.view.ask.ask`): running a turn, the
choice is fork or cancel; idle, also take over. Without a front end the answer is fork
(the conversation goes on, and neither kernel's session is touched).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.state import KernelState, SessionHandle
from mibyan_jupyter.jupyter.view.ask import Choice, ask
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalPolicy
    from mibyan_jupyter.core.stream import StreamFn
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.view import AgentView
    from mibyan_jupyter.store.lease import Holder, Lease
    from mibyan_jupyter.store.session_queries import SessionInfo

FORK = Choice("fork", "Fork and continue here", "A new session with this one's messages so far")
TAKE_OVER = Choice(
    "take_over", "Take it over", "The other kernel stops writing to it at its next write"
)
CANCEL = Choice("cancel", "Cancel", "Run nothing")
HEADLESS_CHOICE = FORK.value
"""What a cell does with a session another kernel holds when nobody can click."""


class AgentStoreError(Exception):
    """The session store cannot be used: one line naming the file and what to do."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentStoreError: {self}"]


def user_facing(error: Exception) -> Exception:
    """A store error as the user should see it: a session that is not there (or an id
    prefix that fits several) is a usage error; anything else names the file and the fix."""
    from mibyan_jupyter.store.sessions import AmbiguousSessionError, SessionNotFoundError

    if isinstance(error, SessionNotFoundError | AmbiguousSessionError):
        return AgentUsageError(f"{error} (list them with %agent sessions)")
    from mibyan_jupyter.jupyter.state import kernel_state
    from mibyan_jupyter.store.backend import is_team_store

    if is_team_store(kernel_state().store_target()):  # no file to switch to: say what to check
        hint = "check c.AgentMagics.db_url or MIBYAN_DB_URL, and the role's password in PGPASSFILE"
    else:
        hint = "set MIBYAN_DB or c.AgentMagics.db_path to use another file"
    return AgentStoreError(f"{REDACT(str(error))} ({hint})")


async def open_session(state: KernelState, plan: CellPlan, notebook: str | None) -> SessionHandle:
    """The session of this cell (the notebook's current one, a new one, or ``--session``),
    made current for the notebook; its agent holds the conversation, the cell's settings
    are put on it by the plan (:mod:`.plan`). Every store call runs on a worker thread:
    opening the store, creating a session, and resolving one (its dead-owner sweep is a
    write). Another
    process holding the write lock then makes SQLite wait on that thread, never on the
    kernel's loop, so clicks and Kernel > Interrupt still arrive; a lock that outlasts the
    store's patience ends the cell with one line (docs/architecture.md, "Store", "A
    writer that recovers and never blocks the loop")."""
    from mibyan_jupyter.store.db import StoreError
    from mibyan_jupyter.store.resume import resume_agent

    target = plan.options.session
    if target is None:
        current = state.current_session(notebook)
        handle = state.session(current) if current is not None else None
        if handle is not None:
            return handle
        target = "new"
    try:
        store = await asyncio.to_thread(state.store)
        if target == "new":
            info = await asyncio.to_thread(store.create, **_new_fields(plan, notebook))
            handle = _keep(state, info, _new_agent(plan))
        else:
            found = await asyncio.to_thread(store.resolve, target)
            if found is None:
                raise AgentUsageError("there is no session yet: run a %%agent cell first")
            handle = state.session(found.id)
            if handle is None:
                agent, info = await asyncio.to_thread(
                    resume_agent, store, found, stream_fn=plan.stream_fn
                )
                handle = _keep(state, info, agent)
    except StoreError as error:
        raise user_facing(error) from None
    state.make_current(notebook, handle.session_id)
    return handle


def _new_fields(plan: CellPlan, notebook: str | None) -> dict[str, Any]:
    return {
        "model": REDACT(plan.model.name),
        "notebook_path": notebook,
        "config": {"system_prompt": plan.new_session_prompt},
    }


def _new_agent(plan: CellPlan) -> Agent:
    from mibyan_jupyter.core.agent import Agent

    # The conversation only: the model, tools and budget are set by plan.configure_agent.
    return Agent(stream_fn=plan.stream_fn, system_prompt=plan.new_session_prompt)


def resume_session(
    state: KernelState, target: str, notebook: str | None, stream_fn: StreamFn
) -> SessionHandle:
    """An open session (``last``, an id or prefix); loads and repairs it when this kernel
    has not opened it yet. Raises the store's errors."""
    from mibyan_jupyter.store.resume import resume_agent

    store = state.store()
    info = store.resolve(target)  # the session that continues it (after a compression)
    if info is None:
        raise AgentUsageError("there is no session yet: run a %%agent cell first")
    handle = state.session(info.id)
    if handle is None:
        agent, info = resume_agent(store, info, stream_fn=stream_fn)  # as resolved: no re-read
        handle = _keep(state, info, agent)
    state.make_current(notebook, handle.session_id)
    return handle


def _keep(
    state: KernelState, info: SessionInfo, agent: Agent, policy: ApprovalPolicy | None = None
) -> SessionHandle:
    """Record the agent into its session and remember it for this kernel."""
    from mibyan_jupyter.store.session_api import approval_policy, attach

    store = state.store()
    writer = attach(agent, store, info)
    writer.on_switch(state.follow)  # after a compaction, the kernel continues the child
    policy = policy if policy is not None else approval_policy(store)
    handle = SessionHandle(info.id, agent, writer, policy, info.title)
    state.keep(handle)
    return handle


# -- one writer per session ------------------------------------------------------------------


@dataclass
class Claim:
    """The session a cell's run writes (``None``: the user cancelled), and what to tell."""

    handle: SessionHandle | None
    lines: list[str] = field(default_factory=list)


async def claim_session(
    state: KernelState, handle: SessionHandle, view: AgentView, plan: CellPlan
) -> Claim:
    """Hold the lease of the handle's session, asking the user when another kernel has
    it; the handle to run with (the same, one reloaded from the store, or a fork's)."""
    from mibyan_jupyter.store.lease import Lease

    keeper, claim = state.leases(), Claim(handle)
    take_over = False
    for _ in range(3):  # the holder may start a turn between the question and the answer
        got = await asyncio.to_thread(keeper.acquire, handle.session_id, take_over=take_over)
        if isinstance(got, Lease):
            claim.handle = await _bind(state, handle, got, plan, claim.lines)
            return claim
        answer = await ask(
            view,
            _question(got, lost=keeper.lease(handle.session_id) is not None),
            [FORK, CANCEL] if got.busy else [FORK, TAKE_OVER, CANCEL],
            default=HEADLESS_CHOICE,
            headless=plan.headless,
            headless_wait=plan.headless_wait,
        )
        if answer.value == CANCEL.value:
            claim.handle = None
            claim.lines.append(f"cancelled: session {handle.session_id[:8]} is in use elsewhere")
            return claim
        if answer.value == FORK.value:
            claim.handle = await _fork(state, handle, view, plan, claim.lines)
            return claim
        take_over = True
    raise AgentUsageError(f"session {handle.session_id[:8]} stayed busy in another kernel")


def _question(holder: Holder, *, lost: bool) -> str:
    who = holder.describe()
    head = f"Session {holder.session_id[:8]} "
    if lost:
        head += "was taken over by another kernel: "
    if holder.busy:
        return head + f"{who} is running a turn in it now. Continue in a fork of it?"
    return head + (
        f"is open in another kernel ({who}, idle). Two kernels writing one session would"
        " interleave it: fork it, or take it over?"
    )


async def _bind(
    state: KernelState, handle: SessionHandle, lease: Lease, plan: CellPlan, lines: list[str]
) -> SessionHandle:
    """Guard the handle's writes with ``lease``. A handle whose agent may be stale (its
    writer held an older lease, or the stored messages are not the ones it wrote) is
    replaced by one loaded from the store, so this kernel continues what is stored."""
    writer = handle.writer
    if writer.fence == lease.fence and writer.stopped is None:
        return handle
    short = handle.session_id[:8]
    if lease.taken_from is not None:
        lines.append(f"took over session {short} from {lease.taken_from.describe()}")
    fresh = writer.fence is None and writer.stopped is None
    if fresh and writer.stored_messages == lease.stored_messages:
        writer.hold(lease.fence)
        return handle
    writer.close()  # what it still kept belongs to a conversation another kernel went on with
    from mibyan_jupyter.store.resume import resume_agent

    store = state.store()
    info = await asyncio.to_thread(store.get, handle.session_id)
    agent, info = await asyncio.to_thread(resume_agent, store, info, stream_fn=plan.stream_fn)
    reloaded = _keep(state, info, agent, handle.policy)
    reloaded.writer.hold(lease.fence)
    lines.append(
        f"session {short} was written by another kernel since this one used it: continuing"
        f" from the stored conversation ({lease.stored_messages} messages)"
    )
    return reloaded


async def _fork(
    state: KernelState, handle: SessionHandle, view: AgentView, plan: CellPlan, lines: list[str]
) -> SessionHandle:
    """A fork of the handle's session (its stored messages), leased to this kernel and
    made the notebook's current session; the view's header names it."""
    from mibyan_jupyter.jupyter.state import notebook_path
    from mibyan_jupyter.store.lease import Lease
    from mibyan_jupyter.store.resume import resume_agent

    store = state.store()
    child = await asyncio.to_thread(store.fork, handle.session_id)
    agent, child = await asyncio.to_thread(resume_agent, store, child, stream_fn=plan.stream_fn)
    forked = _keep(state, child, agent)
    lease = await asyncio.to_thread(state.leases().acquire, child.id)
    assert isinstance(lease, Lease)  # a session made just now has no other holder
    forked.writer.hold(lease.fence)
    state.make_current(notebook_path(), child.id)
    view.set_session(child.id)
    lines.append(
        f"continuing in a fork of session {handle.session_id[:8]}: new session {child.id[:8]}"
        f" (%agent resume {child.id[:8]})"
    )
    return forked
