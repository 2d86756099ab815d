"""What one kernel remembers between cells: the configured defaults, the open store, one
Agent per session (so its "for this session" approvals and queues live as long as the
kernel), each notebook's current session, the runs in progress, and prompts that reached a
running agent from a queued cell.

There is one :class:`KernelState` per process (:func:`kernel_state`). It is the bottom of the
Jupyter layer: the extension puts the configured defaults here at load, so the cell pipeline
and the queue comm read them without reaching back up (docs/architecture.md, "Layers").
Its maps are private; the other modules go through the small API below, so who
changes what stays visible. Tests replace the state with :func:`reset_kernel_state`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mibyan_jupyter.jupyter.defaults import APPROVE_ENV, BUILTIN, Defaults

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Collection

    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalPolicy
    from mibyan_jupyter.jupyter.view import AgentView
    from mibyan_jupyter.store.lease import LeaseKeeper
    from mibyan_jupyter.store.sessions import SessionStore
    from mibyan_jupyter.store.writer import StoreWriter


_QUIET = logging.NullHandler()


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


class KernelState:
    """The kernel's memory between cells; see the module docstring."""

    def __init__(self, db_path: str | None = None, defaults: Defaults = BUILTIN) -> None:
        self.db_path = db_path
        self.defaults: Defaults = defaults
        """The loaded magic after ``%load_ext``, else the built-in values."""
        self.cell_id: str | None = None
        """The id of the cell being executed (from IPython's pre_run_cell event)."""
        self._store: SessionStore | None = None
        self._leases: LeaseKeeper | None = None
        self._sessions: dict[str, SessionHandle] = {}
        self._current: dict[str | None, str] = {}
        """Notebook path (``None`` when unknown) -> its current session id."""
        self._runs: dict[str, ActiveRun] = {}
        self._delivered: dict[str, Delivered] = {}
        """Cell id (or prompt text when the cell id is unknown) -> where its prompt went."""
        self.approve_env = os.environ.get(APPROVE_ENV, "")
        """``MIBYAN_APPROVE`` as it was when the extension loaded: the only value cells
        use, so code a run executes cannot set it for later cells (jupyter/guard.py)."""
        self.rule_write_check: Callable[[], str | None] | None = None
        """Asked by the store before it saves or forgets an "always" rule (a reason
        refuses it); jupyter/guard.py sets it at ``%load_ext``."""
        self.kernel_limits: str | None = None
        """The kernel that cannot deliver clicks while a cell awaits its run (e.g.
        ``"ipykernel 6.31.0"``), decided once at ``%load_ext`` (jupyter/entry/
        capabilities.py); ``None``: the full mode."""

    def configure(self, defaults: Defaults) -> None:
        """Use ``defaults`` (the loaded magic) for every cell, and its database; take
        ``MIBYAN_APPROVE`` from the environment as it is now, at ``%load_ext``."""
        self.defaults = defaults
        self.db_path = defaults.db_path or None
        self.approve_env = os.environ.get(APPROVE_ENV, "")

    def enter_cell(self, cell_id: str | None) -> None:
        self.cell_id = cell_id

    # -- the store ----------------------------------------------------------------------

    def store(self) -> SessionStore:
        """The session store, opened on first use (errors name the file and the fix).
        Opening does not sweep for dead owners: the store's reads that need it do, once
        each (``SessionStore.resolve`` when a session is opened; store/liveness.py)."""
        if self._store is None:
            from mibyan_jupyter.store.sessions import SessionStore

            # The cell says in one line when the store writer fails or recovers (run.py);
            # the writer's log records must not reach the cell as a second, raw line
            # (with no handler configured, logging would print them to stderr).
            logging.getLogger("mibyan_jupyter.store.writer").addHandler(_QUIET)
            self._store = SessionStore(self.store_target())
            self._store.approval_rules.write_check = self.rule_write_check
        return self._store

    def store_target(self) -> str | None:
        """Which store the kernel opens: ``c.AgentMagics.db_url``, else a configured
        ``db_path``, else ``MIBYAN_DB_URL``, else the SQLite default (``MIBYAN_DB``, else
        the Jupyter data dir). A URL is the PostgreSQL team store, as the login role the
        passfile or the hub's environment gives (docs/architecture.md, "The team store
        (PostgreSQL)"); the URL never holds a password (refused when it is set)."""
        from mibyan_jupyter.store.files import database_url

        configured = getattr(self.defaults, "db_url", "") if self.defaults else ""
        if configured:
            return database_url(configured)
        return self.db_path or database_url() or None

    def leases(self) -> LeaseKeeper:
        """This kernel's leases on the sessions it writes, with their heartbeat thread
        (started with the first lease; docs/architecture.md, "Store")."""
        if self._leases is None:
            from mibyan_jupyter.store.lease import LeaseKeeper

            self._leases = LeaseKeeper(self.store().db)
        return self._leases

    def close(self) -> None:
        """Finish the writes still kept (briefly), free the leases, close the store."""
        for handle in self._sessions.values():
            handle.writer.drain(timeout=2.0)
            handle.writer.close()
        if self._leases is not None:
            self._leases.close()
            self._leases = None
        if self._store is not None:
            self._store.close()
            self._store = None
        self._sessions.clear()
        self._current.clear()
        self._runs.clear()
        self._delivered.clear()

    # -- sessions -----------------------------------------------------------------------

    def session(self, session_id: str) -> SessionHandle | None:
        return self._sessions.get(session_id)

    def handles(self) -> list[SessionHandle]:
        """Every session this kernel has opened."""
        return list(self._sessions.values())

    def keep(self, handle: SessionHandle) -> None:
        self._sessions[handle.session_id] = handle

    def current_session(self, notebook: str | None) -> str | None:
        """The notebook's current session id (``None``: none yet)."""
        return self._current.get(notebook)

    def make_current(self, notebook: str | None, session_id: str) -> None:
        self._current[notebook] = session_id

    def follow(self, old_id: str, new_id: str) -> None:
        """A compaction moved the session's writer to its child (``new_id``): the handle,
        the notebooks' current session and a run in progress follow it, so the next cell
        continues the child (docs/architecture.md, "Context compression")."""
        handle = self._sessions.pop(old_id, None)
        if handle is not None:
            handle.session_id = new_id
            self._sessions[new_id] = handle
        for notebook, current in list(self._current.items()):
            if current == old_id:
                self._current[notebook] = new_id
        run = self._runs.pop(old_id, None)
        if run is not None:
            run.session_id = new_id
            self._runs[new_id] = run

    def forget_session(self, session_id: str) -> None:
        """A deleted session: no handle, and no notebook's current session any more."""
        self._sessions.pop(session_id, None)
        for notebook, current in list(self._current.items()):
            if current == session_id:
                del self._current[notebook]

    # -- runs ---------------------------------------------------------------------------

    def begin_run(self, run: ActiveRun) -> None:
        self._runs[run.session_id] = run

    def end_run(self, session_id: str) -> None:
        self._runs.pop(session_id, None)

    def running(self, session_id: str) -> ActiveRun | None:
        return self._runs.get(session_id)

    def active_runs(self) -> list[ActiveRun]:
        return list(self._runs.values())

    def run_of(self, notebook: str | None, session: str | None = None) -> ActiveRun | None:
        """The run in progress for ``session``, else for the notebook's current session."""
        target = session or self._current.get(notebook)
        return self._runs.get(target) if target else None

    def find_run(self, notebook: str | None, target: str | None) -> ActiveRun | None:
        """The run a queued cell means: its session's (``target``: an id or prefix), else
        the notebook's current one, else the only run when the notebook is unknown."""
        run = self.run_of(notebook, target)
        if run is None and target is None and len(self._runs) == 1:
            run = next(iter(self._runs.values()))  # the kernel does not know its notebook's path
        if run is None and target is not None:
            run = next((r for sid, r in self._runs.items() if sid.startswith(target)), None)
        return run

    # -- prompts delivered from queued cells --------------------------------------------

    def remember_delivered(self, key: str, delivered: Delivered) -> None:
        self._delivered[key] = delivered

    def take_delivered(self, cell_id: str | None, prompt: str) -> Delivered | None:
        """Where a queued cell's prompt went (by cell id, else by its text), forgotten."""
        by_cell = self._delivered.pop(cell_id, None) if cell_id else None
        return by_cell or self._delivered.pop(prompt, None)

    def forget_delivered(self, session_id: str, prompts: Collection[str]) -> None:
        """Prompts the session's run did not take after all: their cells will run them."""
        for key, delivered in list(self._delivered.items()):
            if delivered.session_id == session_id and delivered.prompt in prompts:
                del self._delivered[key]


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
