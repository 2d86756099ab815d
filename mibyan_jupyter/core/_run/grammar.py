"""Tracks which parts of the event grammar are open, so a run can always close them.

Every event passes through :meth:`GrammarTracker.observe` *before* the sink sees it: an
event counts as emitted once the sink has been called, even if the sink is then
cancelled or raises. When a run is cut short at an arbitrary point (its task cancelled
while an async subscriber awaits, or a subscriber raising), the loop asks the tracker what
is still open and emits exactly the missing closing events, never one twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mibyan_jupyter.core.events import (
    AgentEnd,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    EndReason,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolMessage
from mibyan_jupyter.core.tools import CANCELLED


def cancelled_result(call_id: str, name: str) -> ToolMessage:
    return ToolMessage(tool_call_id=call_id, name=name, content=CANCELLED, is_error=True)


class GrammarTracker:
    """What the events emitted so far left open: the turn, a message, tool executions,
    approval requests; and whether AgentEnd went out."""

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

    def closing_events(
        self,
        *,
        turn_message: AssistantMessage | None,
        turn_results: Sequence[ToolMessage],
        finished: Mapping[str, ToolMessage],
        append: Callable[[Message], None],
        new_messages: Sequence[Message],
        reason: EndReason,
    ) -> tuple[list[AgentEvent], AssistantMessage | None]:
        """The events that close whatever is open, in grammar order, and the turn's
        assistant message. Messages the events announce are appended (via ``append``)
        first; each tool call of the turn gets a result: the real one if it finished
        (``finished``), else "cancelled"."""
        steps: list[AgentEvent] = []
        open_message = self.open_message
        if open_message is not None:
            if isinstance(open_message, AssistantMessage) and turn_message is None:
                open_message = open_message.model_copy(
                    update={"stop_reason": "aborted", "error_message": "the run was interrupted"}
                )
                turn_message = open_message
                append(open_message)
            steps.append(MessageEnd(message=open_message))
        for call_id, name in self.pending_approvals.items():
            steps.append(
                ApprovalResolved(
                    call_id=call_id,
                    name=name,
                    approved=False,
                    decided_by="abort",
                    reason="the run was interrupted",
                )
            )
        for call_id, name in self.open_tools.items():
            result = finished.get(call_id) or cancelled_result(call_id, name)
            steps.append(
                ToolExecutionEnd(
                    call_id=call_id, name=name, result=result, is_error=result.is_error
                )
            )
        if self.turn_open and turn_message is not None and turn_message.sendable:
            answered = {m.tool_call_id for m in turn_results}
            for call in turn_message.tool_calls:
                if call.id not in answered:
                    result = finished.get(call.id) or cancelled_result(call.id, call.function.name)
                    append(result)
                    steps += [MessageStart(message=result), MessageEnd(message=result)]
        if self.turn_open:
            steps.append(TurnEnd(message=turn_message, tool_results=tuple(turn_results)))
        steps.append(AgentEnd(messages=tuple(new_messages), reason=reason))
        return steps, turn_message
