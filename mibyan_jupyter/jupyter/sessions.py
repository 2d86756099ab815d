"""Which session a cell talks to: this notebook's current one, a new one, the last one, or
one named by id; opened once per kernel and kept, so successive cells are one conversation
and "for this session" approvals hold until the kernel goes.

Store problems (a corrupt, locked or newer database) become one-line errors that name the
file and the fix, raised before anything is sent to a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.options import AgentUsageError
from mibyan_jupyter.jupyter.state import KernelState, SessionHandle
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.stream import StreamFn
    from mibyan_jupyter.jupyter.models import ChosenModel
    from mibyan_jupyter.jupyter.options import CellOptions, Defaults

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant working inside a Jupyter notebook, in the user's running "
    "Python kernel. Use the tools you are given to look at the user's variables, run Python "
    "in their namespace and read files next to the notebook; say what you did. Answer in "
    "concise Markdown."
)


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


def open_session(
    state: KernelState,
    options: CellOptions,
    chosen: ChosenModel,
    notebook: str | None,
    stream_fn: StreamFn,
    defaults: Defaults,
) -> SessionHandle:
    """The session of this cell, made current for the notebook."""
    from mibyan_jupyter.store.db import StoreError

    target = options.session
    if target is None:
        current = state.current.get(notebook)
        if current is not None and current in state.sessions:
            return state.sessions[current]
        target = "new"
    try:
        if target == "new":
            system = options.system_prompt or defaults.system_prompt or DEFAULT_SYSTEM_PROMPT
            handle = _new(state, chosen, notebook, stream_fn, system)
        else:
            handle = resume_session(state, target, notebook, stream_fn)
    except StoreError as error:
        raise user_facing(error) from None
    state.current[notebook] = handle.session_id
    return handle


def _new(
    state: KernelState,
    chosen: ChosenModel,
    notebook: str | None,
    stream_fn: StreamFn,
    system_prompt: str,
) -> SessionHandle:
    from mibyan_jupyter.core.agent import Agent

    model = REDACT(chosen.name)
    info = state.store().create(
        model=model, notebook_path=notebook, config={"system_prompt": system_prompt}
    )
    agent = Agent(stream_fn=stream_fn, model=chosen.name, system_prompt=system_prompt)
    return _keep(state, info.id, agent, info.title)


def resume_session(
    state: KernelState, target: str, notebook: str | None, stream_fn: StreamFn
) -> SessionHandle:
    """An open session (``last``, an id or prefix); loads and repairs it when this kernel
    has not opened it yet. Raises the store's errors."""
    from mibyan_jupyter.store.resume import resume_agent

    store = state.store()
    info = store.last() if target == "last" else store.get(target)
    if info is None:
        raise AgentUsageError("there is no session yet: run a %%agent cell first")
    info = store.newest_compression_descendant(info.id)
    if info.id in state.sessions:
        handle = state.sessions[info.id]
    else:
        agent, info = resume_agent(store, info.id, stream_fn=stream_fn)
        handle = _keep(state, info.id, agent, info.title)
    state.current[notebook] = handle.session_id
    return handle


def _keep(state: KernelState, session_id: str, agent: Agent, title: str) -> SessionHandle:
    """Record the agent into its session and remember it for this kernel."""
    from mibyan_jupyter.store.session_api import approval_policy, attach

    store = state.store()
    writer = attach(agent, store, session_id)
    handle = SessionHandle(session_id, agent, writer, approval_policy(store), title)
    state.sessions[session_id] = handle
    return handle
