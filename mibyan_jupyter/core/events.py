"""The agent's event stream: what subscribers (the view, the store, tests) see of a run.

The grammar, which the loop guarantees and the tests check as a property:

* ``AgentStart`` comes first and ``AgentEnd`` last, exactly once each, also after an
  abort, a model error or an exception in a hook.
* Turns do not nest: ``TurnStart`` ... ``TurnEnd``. A turn holds at most one assistant
  message; ``TurnEnd`` carries it with the tool results of that turn, in call order.
* Every ``MessageStart`` is followed by its ``MessageEnd`` before another message starts;
  ``MessageUpdate`` only appears between them, and only for assistant messages.
* Every ``ToolExecutionStart`` precedes its ``ToolExecutionEnd`` (same call id), and
  ``ToolExecutionUpdate`` comes between them. Ends of a parallel batch arrive in
  completion order; the tool result messages follow in call order.
* ``ApprovalRequested`` / ``ApprovalResolved`` sit between the start and end of their
  tool execution. ``BudgetUpdated``, retry, fallback and compaction notices may come
  anywhere inside the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .messages import AssistantMessage, Message, ToolMessage
from .notices import CompactionNotice, FallbackNotice, NoteNotice, RetryNotice
from .stream import LazyFields, StreamEvent


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentStart(_Event):
    type: Literal["agent_start"] = "agent_start"


EndReason: TypeAlias = Literal[
    "completed", "aborted", "error", "stopped_by_hook", "budget_exhausted"
]


class AgentEnd(_Event):
    """``messages`` are the messages this run added; ``reason`` why it ended."""

    type: Literal["agent_end"] = "agent_end"
    messages: tuple[Message, ...]
    reason: EndReason = "completed"


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"


class TurnEnd(_Event):
    type: Literal["turn_end"] = "turn_end"
    message: AssistantMessage | None
    tool_results: tuple[ToolMessage, ...] = ()


class MessageStart(_Event):
    type: Literal["message_start"] = "message_start"
    message: Message


class MessageUpdate(LazyFields):
    """An assistant message being streamed: ``message`` is the partial so far, ``event``
    the stream event (a delta) that changed it.

    The loop defers ``message`` (see :class:`~.stream.LazyFields`): it is built when first
    read, as it was at this update, so a subscriber that reads only ``event`` costs the same
    at the first delta and the eighty-thousandth (docs/architecture.md, "Streaming")."""

    type: Literal["message_update"] = "message_update"
    message: AssistantMessage
    event: StreamEvent


class MessageEnd(_Event):
    type: Literal["message_end"] = "message_end"
    message: Message


class ToolExecutionStart(_Event):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    call_id: str
    name: str
    args: Any
    """The arguments as the model sent them (parsed JSON, or the raw text if invalid)."""


class ToolExecutionUpdate(_Event):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    call_id: str
    name: str
    partial: Any
    """The tool's partial :class:`ToolResult` (content and details so far)."""


class ToolExecutionEnd(_Event):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    call_id: str
    name: str
    result: ToolMessage
    is_error: bool


class ApprovalRequested(_Event):
    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    name: str
    args: Any
    reason: str = ""


class ApprovalResolved(_Event):
    type: Literal["approval_resolved"] = "approval_resolved"
    call_id: str
    name: str
    approved: bool
    scope: Literal["once", "session", "always"] = "once"
    decided_by: Literal["user", "policy", "rule", "timeout", "abort", "error"] = "user"
    reason: str | None = None


class BudgetStatus(_Event):
    """One budget: ``limit`` is ``None`` when unlimited (the bar shows usage only)."""

    name: Literal["turns", "input_tokens", "output_tokens", "total_tokens", "cost"]
    used: float
    limit: float | None
    unknown: bool = False
    """Some of what was used has no known price: ``used`` is a lower bound (cost only)."""


class BudgetUpdated(_Event):
    type: Literal["budget_updated"] = "budget_updated"
    budgets: tuple[BudgetStatus, ...]


AgentEvent: TypeAlias = Annotated[
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | ApprovalRequested
    | ApprovalResolved
    | BudgetUpdated
    | RetryNotice
    | FallbackNotice
    | CompactionNotice
    | NoteNotice,
    Field(discriminator="type"),
]
AGENT_EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)

EventEmit: TypeAlias = Callable[[AgentEvent], Awaitable[None]]
"""How the loop's parts hand an event on (awaited, so async subscribers are honoured)."""
