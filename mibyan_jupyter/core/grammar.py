"""Tracks which parts of the event grammar are open, so a run can always close them.

Every event passes through :meth:`GrammarTracker.observe` *before* the sink sees it: an
event counts as emitted once the sink has been called, even if the sink is then
cancelled or raises. When a run is cut short at an arbitrary point (its task cancelled
while an async subscriber awaits, or a subscriber raising), the loop asks the tracker what
is still open and emits exactly the missing closing events, never one twice.
"""

from __future__ import annotations

from .events import (
    AgentEnd,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from .messages import Message


class GrammarTracker:
    __slots__ = ("agent_ended", "open_message", "open_tools", "pending_approvals", "turn_open")

    def __init__(self) -> None:
        self.turn_open = False
        self.open_message: Message | None = None
        self.open_tools: dict[str, str] = {}
        self.pending_approvals: dict[str, str] = {}
        self.agent_ended = False

    def observe(self, event: AgentEvent) -> None:
        if isinstance(event, TurnStart):
            self.turn_open = True
        elif isinstance(event, TurnEnd):
            self.turn_open = False
        elif isinstance(event, MessageStart):
            self.open_message = event.message
        elif isinstance(event, MessageEnd):
            self.open_message = None
        elif isinstance(event, ToolExecutionStart):
            self.open_tools[event.call_id] = event.name
        elif isinstance(event, ToolExecutionEnd):
            self.open_tools.pop(event.call_id, None)
        elif isinstance(event, ApprovalRequested):
            self.pending_approvals[event.call_id] = event.name
        elif isinstance(event, ApprovalResolved):
            self.pending_approvals.pop(event.call_id, None)
        elif isinstance(event, AgentEnd):
            self.agent_ended = True
