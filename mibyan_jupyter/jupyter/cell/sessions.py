"""Which session a cell talks to: this notebook's current one, a new one, the last one, or
one named by id; opened once per kernel and kept, so successive cells are one conversation
and "for this session" approvals hold until the kernel goes.

Store problems (a corrupt, locked or newer database) become one-line errors that name the
file and the fix, raised before anything is sent to a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.state import KernelState, SessionHandle
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.stream import StreamFn
    from mibyan_jupyter.jupyter.cell.plan import CellPlan
    from mibyan_jupyter.store.session_queries import SessionInfo


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
    return AgentStoreError(
        f"{REDACT(str(error))} (set MIBYAN_DB or c.AgentMagics.db_path to use another file)"
    )


def open_session(state: KernelState, plan: CellPlan, notebook: str | None) -> SessionHandle:
    """The session of this cell, made current for the notebook. Its agent holds the
    conversation; the cell's settings are put on it by the plan (:mod:`.plan`)."""
    from mibyan_jupyter.store.db import StoreError

    target = plan.options.session
    if target is None:
        current = state.current_session(notebook)
        handle = state.session(current) if current is not None else None
        if handle is not None:
            return handle
        target = "new"
    try:
        if target == "new":
            handle = _new(state, plan, notebook)
        else:
            handle = resume_session(state, target, notebook, plan.stream_fn)
    except StoreError as error:
        raise user_facing(error) from None
    state.make_current(notebook, handle.session_id)
    return handle


def _new(state: KernelState, plan: CellPlan, notebook: str | None) -> SessionHandle:
    from mibyan_jupyter.core.agent import Agent

    system_prompt = plan.new_session_prompt
    info = state.store().create(
        model=REDACT(plan.model.name),
        notebook_path=notebook,
        config={"system_prompt": system_prompt},
    )
    # The conversation only: the model, tools and budget are set by plan.configure_agent.
    agent = Agent(stream_fn=plan.stream_fn, system_prompt=system_prompt)
    return _keep(state, info, agent)


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


def _keep(state: KernelState, info: SessionInfo, agent: Agent) -> SessionHandle:
    """Record the agent into its session and remember it for this kernel."""
    from mibyan_jupyter.store.session_api import approval_policy, attach

    store = state.store()
    writer = attach(agent, store, info)
    handle = SessionHandle(info.id, agent, writer, approval_policy(store), info.title)
    state.keep(handle)
    return handle
