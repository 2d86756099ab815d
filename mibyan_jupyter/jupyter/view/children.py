"""A delegated child agent's part of the live view: a nested card streaming its own text,
tool calls and approvals, with its goal, status, turns and cost.

Why a translator per child and not a ``child`` field on every op: the child's events are a
stream of their own (its messages, its calls, its approvals), and :class:`.translate.EventOps`
already turns one such stream into ops. So each child gets an ``EventOps`` of its own that
writes to the parent's one outbox through :class:`ChildOutbox`, which scopes every id as
``<child>/<id>`` (a child's call ids come from the provider and may equal the parent's),
marks the ops that make an element with ``child`` (so the front end makes it inside the
child's card), and keeps the run-wide ops (the run status, the budget bars) out of the
parent's header and footer: they become the child's own :class:`.ops.ChildStatusOp`.
Deltas keep their compact wire form (docs/architecture.md, "Streaming").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from mibyan_jupyter.core.events import (
    AgentEnd,
    AgentEvent,
    BudgetUpdated,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.export.children import ChildTranscript
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.jupyter.view.child_ops import ChildStartOp, ChildStatus, ChildStatusOp
from mibyan_jupyter.jupyter.view.header import ViewHeader
from mibyan_jupyter.jupyter.view.ops import DeltaKind, RunStatus, StructuralOp
from mibyan_jupyter.jupyter.view.outbox import Outbox
from mibyan_jupyter.jupyter.view.translate import EventOps, RiskNote

SEPARATOR = "/"
_MAKES_ELEMENT = frozenset({"user", "assistant", "tool", "notice"})
"""The ops that make an element: the front end makes it in the child's card."""
_RUN_WIDE = frozenset({"header", "bar", "queued"})
"""The parent's header and footer are the parent's: a child's bars become its status."""
_END_STATUS: dict[str, ChildStatus] = {
    "completed": "completed",
    "aborted": "stopped",
    "budget_exhausted": "budget_exhausted",
    "stopped_by_hook": "stopped",
}


class ChildOutbox(Outbox):
    """The parent's outbox seen through one child's scope. It owns no wire, timer or
    stream of its own (hence no ``Outbox.__init__``): every op goes to the parent's outbox,
    in order with the parent's, with its ids scoped."""

    def __init__(self, parent: Outbox, key: str, on_run: Callable[[RunStatus], None]) -> None:
        self._parent = parent
        self._key = key
        self._on_run = on_run

    def scoped(self, ident: str) -> str:
        return f"{self._key}{SEPARATOR}{ident}"

    def add(self, op: StructuralOp, *, now: bool = True) -> None:
        kind = op["op"]
        if kind == "run":
            self._on_run(cast(Any, op)["status"])
            return
        if kind in _RUN_WIDE:
            return
        copy: dict[str, Any] = dict(op)
        if isinstance(copy.get("id"), str):
            copy["id"] = self.scoped(copy["id"])
        if kind == "tool" and copy.get("msg"):
            copy["msg"] = self.scoped(copy["msg"])
        if kind == "clear":
            copy["calls"] = [self.scoped(call) for call in copy["calls"]]
        if kind == "result":  # a child keeps a spilled result in its own, in-memory store,
            copy.pop("spilled", None)  # which the view cannot page: no Load that does nothing
        if kind in _MAKES_ELEMENT:
            copy["child"] = self._key
        self._parent.add(cast(StructuralOp, copy), now=now)

    def delta(self, kind: DeltaKind, ident: str, text: str) -> None:
        self._parent.delta(kind, self.scoped(ident), text)

    def end_stream(self, kind: DeltaKind, ident: str) -> None:
        self._parent.end_stream(kind, self.scoped(ident))

    def discard(self, kind: DeltaKind, ident: str) -> None:
        self._parent.discard(kind, self.scoped(ident))

    def flush(self) -> None:
        self._parent.flush()

    def close(self) -> None:
        """The parent's outbox closes with the parent's view."""


@dataclass(frozen=True, slots=True)
class ChildCard:
    """What a child's card says from the start (core/delegation.py's ``ChildRun``)."""

    key: str
    """The child's id in the view (its task id, unique in the cell)."""
    parent_call: str
    """The parent's ``delegate_task`` call whose card holds the child's."""
    goal: str
    tools: Sequence[str]
    max_turns: int
    session_id: str | None = None
    """The child's own session in the store (``None``: not stored)."""


class ChildView:
    """One child's nested card: an event subscriber of the child's agent."""

    def __init__(
        self,
        outbox: Outbox,
        header: ViewHeader,
        card: ChildCard,
        risk_note: RiskNote | None = None,
        on_budget: Callable[[], None] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        key = self.key = card.key
        self.card = card
        self._model = header.model
        self.messages: list[Message] = []
        """The child's finished messages, for the parent's saved transcript."""
        self._out = outbox
        self._scope = ChildOutbox(outbox, key, self._run)
        self._ops = EventOps(self._scope, header, risk_note=risk_note)
        self._on_budget = on_budget
        self._on_wait = on_wait
        """Told when the child starts or stops waiting for a click (the parent's status)."""
        self.status: ChildStatus = "running"
        self.turns = 0
        self.tokens = 0
        self.cost: float | None = 0.0
        self.ended = False
        self.running: set[str] = set()
        """The child's calls running now (unscoped): where a tool's live output goes."""
        self.tool_output = self._ops.tool_output
        """What the child's running tools print (their unscoped call ids)."""
        start = ChildStartOp(
            op="child_start",
            id=key,
            parent=card.parent_call,
            goal=card.goal,
            tools=list(card.tools),
            max_turns=card.max_turns,
        )
        outbox.add(start)

    @property
    def pending_approvals(self) -> set[str]:
        """The child's approvals asked and not yet decided (its own, unscoped call ids)."""
        return self._ops.pending_approvals

    def scoped(self, ident: str) -> str:
        return self._scope.scoped(ident)

    def unscoped(self, ident: str) -> str | None:
        """``ident`` without this child's scope (``None``: not one of this child's ids)."""
        prefix = self.key + SEPARATOR
        return ident[len(prefix) :] if ident.startswith(prefix) else None

    def __call__(self, event: AgentEvent) -> None:
        if self.ended:
            return
        if isinstance(event, BudgetUpdated):
            self._spent(event)
            return
        if isinstance(event, ToolExecutionStart):
            self.running.add(event.call_id)
        elif isinstance(event, MessageEnd):
            self.messages.append(event.message)
        self._ops(event)
        if isinstance(event, ToolExecutionEnd):
            self.running.discard(event.call_id)
        elif isinstance(event, AgentEnd):
            self.end(_END_STATUS.get(event.reason, "error"))

    def _spent(self, event: BudgetUpdated) -> None:
        """The child's own turns, tokens and cost on its card; the parent's bars, which
        include what the children spent (core/budget_gate.py), move with them."""
        for budget in event.budgets:
            if budget.name == "turns":
                self.turns = int(budget.used)
            elif budget.name == "total_tokens":
                self.tokens = int(budget.used)
            elif budget.name == "cost":
                self.cost = None if budget.unknown else float(budget.used)
        self._send_status()
        if self._on_budget is not None:
            self._on_budget()

    def _run(self, status: RunStatus) -> None:
        if status != "done" and not self.ended:
            self.status = status
            self._send_status()
            if self._on_wait is not None:
                self._on_wait()

    def _send_status(self) -> None:
        self._out.add(
            ChildStatusOp(
                op="child_status",
                id=self.key,
                status=self.status,
                turns=self.turns,
                tokens=self.tokens,
                cost=self.cost,
            )
        )

    def transcript(self) -> ChildTranscript:
        """What the child did, folded under the parent's call in the saved transcript."""
        card = self.card
        session = SessionMeta(id=card.session_id or card.key, title=card.goal, model=self._model)
        return ChildTranscript(
            card.key, card.goal, session, tuple(self.messages), self.status, card.parent_call
        )

    def end(self, status: ChildStatus) -> None:
        """The child's run ended (its ``AgentEnd``, or the parent's view finishing first):
        the card says how, its tools' live output stops. Idempotent."""
        if self.ended:
            return
        self.status = status
        self._send_status()
        self.ended = True
        self.tool_output.close()


class Children:
    """The delegated children of one view, by key: the view asks them whether a click is
    for one of theirs and where a running tool's output goes (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, ChildView] = {}

    def add(self, child: ChildView) -> None:
        with self._lock:
            self._by_key[child.key] = child

    def _all(self) -> list[ChildView]:
        with self._lock:
            return list(self._by_key.values())

    def pending(self, call_id: str) -> bool:
        """Whether ``call_id`` (scoped) is an approval one of the children waits for."""
        for child in self._all():
            inner = child.unscoped(call_id)
            if inner is not None and inner in child.pending_approvals:
                return True
        return False

    def output(self, call_id: str, stream: Literal["stdout", "stderr"], text: str) -> bool:
        """Give what a tool printed to the child running ``call_id``; whether one was."""
        for child in self._all():
            if not child.ended and call_id in child.running:
                child.tool_output.write(call_id, stream, text)
                return True
        return False

    def waiting(self) -> bool:
        """Whether a child waits for a click (the parent's view then says so too)."""
        return any(child.pending_approvals for child in self._all() if not child.ended)

    def transcripts(self) -> list[ChildTranscript]:
        return [child.transcript() for child in self._all()]

    def end_all(self, status: ChildStatus) -> None:
        """The view finishes: a child card still open says so."""
        for child in self._all():
            child.end(status)
