"""What one kernel remembers between cells: the open store, one Agent per session (so its
"for this session" approvals and queues live as long as the kernel), each notebook's
current session, the run in progress, and prompts that reached a running agent from a
queued cell.

There is one :class:`KernelState` per process (:func:`kernel_state`); the magic, the run
and the queue comm all read it, and tests replace it with :func:`reset_kernel_state`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import asyncio

    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalPolicy
    from mibyan_jupyter.jupyter.view import AgentView
    from mibyan_jupyter.store.sessions import SessionStore
    from mibyan_jupyter.store.writer import StoreWriter


@dataclass
class SessionHandle:
    """A session this kernel has opened: its agent, its writer, its approval policy."""

    session_id: str
    agent: Agent
    writer: StoreWriter
    policy: ApprovalPolicy
    title: str = ""


@dataclass
class ActiveRun:
    """The run a cell is awaiting (at most one per session)."""

    session_id: str
    notebook: str | None
    task: asyncio.Task[object]
    view: AgentView
    started: float
    model: str


@dataclass(frozen=True, slots=True)
class Delivered:
    """A queued cell's prompt that already reached a running agent."""

    session_id: str
    mode: Literal["steer", "follow_up"]
    prompt: str


@dataclass
class KernelState:
    db_path: str | None = None
    _store: SessionStore | None = None
    sessions: dict[str, SessionHandle] = field(default_factory=dict)
    current: dict[str | None, str] = field(default_factory=dict)
    """Notebook path (``None`` when unknown) -> its current session id."""
    runs: dict[str, ActiveRun] = field(default_factory=dict)
    delivered: dict[str, Delivered] = field(default_factory=dict)
    """Cell id (or prompt text when the cell id is unknown) -> where its prompt went."""
    cell_id: str | None = None
    """The id of the cell being executed (from IPython's pre_run_cell event)."""

    def store(self) -> SessionStore:
        """The session store, opened on first use (errors name the file and the fix)."""
        if self._store is None:
            from mibyan_jupyter.store.sessions import SessionStore

            self._store = SessionStore(self.db_path or None)
            self._store.mark_interrupted_if_dead()
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self.sessions.clear()
        self.current.clear()
        self.runs.clear()
        self.delivered.clear()

    def run_of(self, notebook: str | None, session: str | None = None) -> ActiveRun | None:
        """The run in progress for ``session``, else for the notebook's current session."""
        target = session or self.current.get(notebook)
        return self.runs.get(target) if target else None


_STATE = KernelState()


def kernel_state() -> KernelState:
    return _STATE


def reset_kernel_state(db_path: str | None = None) -> KernelState:
    """A fresh state (tests; ``%unload_ext``): closes the store of the old one."""
    global _STATE
    _STATE.close()
    _STATE = KernelState(db_path=db_path)
    return _STATE


def notebook_path() -> str | None:
    """The notebook this kernel serves: jupyter_server tells kernels through
    ``JPY_SESSION_NAME``; nbclient and plain IPython do not (then ``None``)."""
    return os.environ.get("JPY_SESSION_NAME") or None
