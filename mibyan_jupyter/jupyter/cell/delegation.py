"""The ``delegate`` tool group in a cell: core/delegation.py's ``delegate_task`` bound to
the session's agent, the cell's one budget gate, the cell's approver, the store and the view.

What the cell adds to the core's child agents (docs/architecture.md, "Tools from outside"):

* **Approvals are clicked in the parent's cell.** A child's gate is the core's
  ``child_approval_gate`` (the "always" rules carried over, the parent's "this session"
  approvals not) with the cell's own approver behind :class:`ScopedApprover`, which asks
  about the child's call under its scoped id (``child-1/<call id>``): the id the child's
  approval card has in the view (jupyter/view/children.py), whose clicks come back to the
  same approver. Headless, ``--approve auto`` or ``deny``: the cell's approver decides for
  the child as it does for the parent.
* **A child keeps its own transcript** in a session of its own (``link_kind='delegation'``,
  parent: the session being run, migration 0005), leased to this kernel and written by a
  store writer of its own, made off the loop at the child's start (:class:`ChildSession`)
  and closed (drained, lease released) once the child ended. Its config records the goal,
  the tools, the turn budget and the parent's call, so an export nests it under that call.
* **A nested card** per child in the cell's view, streaming its text, calls and approvals;
  the parent's footer bars move with the children's spend (the gate's family totals).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mibyan_jupyter.core.approval import ApprovalGate, ApprovalRequest, Approver, Decision
from mibyan_jupyter.core.events import AgentEvent
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.view.children import SEPARATOR, ChildCard

if TYPE_CHECKING:
    from mibyan_jupyter.core.delegation import ChildRun
    from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
    from mibyan_jupyter.store.conn import StoreDatabase
    from mibyan_jupyter.store.lease import LeaseKeeper
    from mibyan_jupyter.store.writer import StoreWriter

_log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0
"""How long a child's writer may take to write what it holds once the child ended."""


def delegate_tools(setting: ToolSetting, parent_tools: tuple[Tool, ...]) -> list[Tool]:
    """The ``delegate`` group: one ``delegate_task`` tool whose children may use a subset
    of ``parent_tools`` (the cell's other tools)."""
    from mibyan_jupyter.core.delegation import CHILD_MAX_TURNS, delegate_tool

    max_turns = setting.plan.options.delegate_turns or CHILD_MAX_TURNS
    children = CellChildren(setting, max_turns)
    tool = delegate_tool(
        setting.agent,
        tools=parent_tools,
        gate=setting.plan.gate,
        child_approval=children.approval,
        on_child=children.start,
        max_turns=max_turns,
    )
    return [tool]


def scoped_id(child_id: str, call_id: str) -> str:
    """A child's call id as the view (and the cell's approver) know it."""
    return f"{child_id}{SEPARATOR}{call_id}"


@dataclass(frozen=True)
class ScopedApprover:
    """The cell's approver, asked about a child's call under its scoped id."""

    inner: Approver
    child_id: str

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        scoped = replace(request, call_id=scoped_id(self.child_id, request.call_id))
        return await self.inner(scoped, signal)


class CellChildren:
    """The children of one cell's ``delegate_task``: their gates, cards and sessions."""

    def __init__(self, setting: ToolSetting, max_turns: int) -> None:
        self._setting = setting
        self._max_turns = max_turns

    def approval(self, run: ChildRun) -> ApprovalGate | None:
        from mibyan_jupyter.core.delegation import child_approval_gate

        parent = self._setting.approval
        return child_approval_gate(parent, approver=ScopedApprover(parent.approver, run.child_id))

    def start(self, run: ChildRun) -> Callable[[], None]:
        """``on_child``: the child's card and session, subscribed to its agent before it
        starts; the cleanup unsubscribes them and closes the session."""
        undo: list[Callable[[], None]] = []
        session = self._session(run)
        view = self._setting.view
        if view is not None:  # subscribed first: the card never waits for the store
            stored = session.session_id if session is not None else None
            card = ChildCard(
                run.child_id, run.parent_call_id, run.goal, run.tools, self._max_turns, stored
            )
            gate = self._setting.plan.gate
            undo.append(
                run.agent.subscribe(view.child(card, lambda: view(gate.tracker.snapshot())))
            )
        if session is not None:
            undo.append(run.agent.subscribe(session))

        def cleanup() -> None:
            for step in undo:
                step()
            if session is not None:
                session.close()

        return cleanup

    def _session(self, run: ChildRun) -> ChildSession | None:
        handle = self._setting.handle
        if handle is None:
            return None
        from mibyan_jupyter.jupyter.state import kernel_state, notebook_path

        state = kernel_state()
        plan = self._setting.plan
        record = {
            "system_prompt": run.agent.state.system_prompt,
            "tools": ",".join(run.tools),
            "max_turns": self._max_turns,
            "delegation": {
                "child_id": run.child_id,
                "parent_call_id": run.parent_call_id,
                "goal": run.goal,
                "tools": list(run.tools),
            },
        }
        return ChildSession(
            state.store().db,
            state.leases(),
            parent_id=handle.writer.session_id,  # a compaction may have moved the parent
            title=run.goal,
            model=plan.model.name,
            notebook=notebook_path(),
            config=record,
        )


class ChildSession:
    """The store side of one child: an async subscriber of its agent that makes the
    child's session (row, lease, writer) on a worker thread at its first event, then
    passes every event to the writer; :meth:`close` writes what is left and frees the
    lease, off the loop. A store that fails leaves the child running unrecorded (one log
    line): a store failure never breaks a run (docs/architecture.md, "Store")."""

    def __init__(
        self,
        db: StoreDatabase,
        leases: LeaseKeeper,
        *,
        parent_id: str,
        title: str,
        model: str,
        notebook: str | None,
        config: dict[str, object],
    ) -> None:
        from mibyan_jupyter.store.records import new_id

        self.session_id = new_id()
        self._db, self._leases = db, leases
        self._parent_id, self._title, self._model = parent_id, title, model
        self._notebook, self._config = notebook, config
        self.writer: StoreWriter | None = None
        self._failed = False

    def _open(self) -> StoreWriter:
        from mibyan_jupyter.store.lease import Lease
        from mibyan_jupyter.store.records import insert_session
        from mibyan_jupyter.store.session_queries import DELEGATION
        from mibyan_jupyter.store.writer import StoreWriter

        insert_session(
            self._db,
            session_id=self.session_id,
            title=self._title,
            model=self._model,
            notebook_path=self._notebook,
            config=self._config,
            parent_id=self._parent_id,
            link_kind=DELEGATION,
        )
        lease = self._leases.acquire(self.session_id)  # a new session: nobody else holds it
        fence = lease.fence if isinstance(lease, Lease) else None
        return StoreWriter(self._db, self.session_id, model=self._model, fence=fence)

    async def __call__(self, event: AgentEvent) -> None:
        if self.writer is None and not self._failed:
            try:
                self.writer = await asyncio.to_thread(self._open)
            except Exception as error:  # a store failure must not break the child's run
                self._failed = True
                _log.warning("the child session %s was not stored: %s", self.session_id, error)
                return
        if self.writer is not None:
            await self.writer(event)

    def close(self) -> None:
        """Drain and close the writer and release the lease, on a worker thread."""
        writer, self.writer = self.writer, None
        if writer is None:
            return

        def finish() -> None:
            writer.drain(CLOSE_WAIT_S)
            writer.close()
            with contextlib.suppress(Exception):
                self._leases.release(self.session_id)

        try:
            asyncio.get_running_loop().run_in_executor(None, finish)
        except RuntimeError:  # no loop running (a plain-Python caller): finish here
            finish()
