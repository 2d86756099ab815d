"""The loop's configuration: model, hooks, queues, tool execution and budgets.

Names and semantics follow pi's ``AgentLoopConfig``. Every hook may be sync or async.
Hooks that decide about one tool call (``prepare_arguments``, ``before_tool_call``,
``after_tool_call``) turn their own exceptions into error results; the others
(``transform_context``, ``convert_to_llm``) turn them into a failed assistant message, so a
buggy hook ends the run cleanly instead of breaking the event grammar.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from .approval import ApprovalGate
from .budget import BudgetLimits
from .budget_gate import BudgetGate, BudgetStop, PriceFn
from .compaction import CompactionSettings
from .messages import AssistantMessage, Content, Message, ToolCall, ToolMessage
from .notes import NoteContext as NoteContext
from .notes import NotesFn
from .results import ResultStore
from .signal import AbortSignal
from .stream import ThinkingLevel
from .tools import Tool, ToolRegistry, ToolResult

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]
ToolExecutionMode: TypeAlias = Literal["sequential", "parallel"]


@dataclass
class AgentContext:
    """What a run starts from. The loop appends each finished message to ``messages`` in
    place, before its MessageEnd event (the Agent's state relies on it); pass a copy to
    keep the original list unchanged."""

    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: ToolRegistry = field(default_factory=ToolRegistry)

    @classmethod
    def of(
        cls, system_prompt: str = "", messages: Sequence[Message] = (), tools: Sequence[Tool] = ()
    ) -> AgentContext:
        return cls(system_prompt, list(messages), ToolRegistry(tools))


@dataclass(frozen=True, slots=True)
class BeforeToolCall:
    """What ``before_tool_call`` sees: the call, its validated arguments, the message."""

    assistant_message: AssistantMessage
    call: ToolCall
    tool: Tool
    args: Any
    messages: Sequence[Message]


@dataclass(frozen=True, slots=True)
class Block:
    """Returned by ``before_tool_call`` to stop a call; ``reason`` reaches the model."""

    reason: str = "Tool execution was blocked"


@dataclass(frozen=True, slots=True)
class AfterToolCall:
    """What ``after_tool_call`` sees: the call and its result before any rewrite."""

    assistant_message: AssistantMessage
    call: ToolCall
    tool: Tool
    args: Any
    result: ToolResult
    messages: Sequence[Message]


@dataclass(frozen=True, slots=True)
class ResultOverride:
    """Returned by ``after_tool_call``; fields left ``None`` keep the tool's values."""

    content: Content | None = None
    details: dict[str, object] | None = None
    is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What ``should_stop_after_turn`` and ``prepare_next_turn`` see after a turn."""

    message: AssistantMessage
    tool_results: Sequence[ToolMessage]
    messages: Sequence[Message]
    new_messages: Sequence[Message]


@dataclass(frozen=True, slots=True)
class TurnUpdate:
    """Returned by ``prepare_next_turn``: replaces, for the next model call only, the
    messages the model sees, the model, or the thinking level."""

    messages: Sequence[Message] | None = None
    model: str | None = None
    thinking_level: ThinkingLevel | None = None


MessagesHook: TypeAlias = Callable[[Sequence[Message]], MaybeAwaitable[Sequence[Message]]]
QueueHook: TypeAlias = Callable[[], MaybeAwaitable[Sequence[Message]]]


@dataclass
class LoopConfig:
    """Everything the loop needs besides the context, the signal and the stream function."""

    model: str
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None
    tool_execution: ToolExecutionMode = "parallel"
    tool_threads: int = 16
    """Worker threads for sync tools (asyncio's default pool has only cpu+4)."""
    tool_timeout: float | None = None
    """Seconds a tool may run before its call fails; ``None``: no limit."""
    transform_context: (
        Callable[[Sequence[Message], AbortSignal], MaybeAwaitable[Sequence[Message]]] | None
    ) = None
    convert_to_llm: MessagesHook | None = None
    before_tool_call: (
        Callable[[BeforeToolCall, AbortSignal], MaybeAwaitable[Block | None]] | None
    ) = None
    after_tool_call: (
        Callable[[AfterToolCall, AbortSignal], MaybeAwaitable[ResultOverride | None]] | None
    ) = None
    should_stop_after_turn: Callable[[TurnContext], MaybeAwaitable[bool]] | None = None
    prepare_next_turn: Callable[[TurnContext], MaybeAwaitable[TurnUpdate | None]] | None = None
    get_steering_messages: QueueHook | None = None
    get_follow_up_messages: QueueHook | None = None
    approval: ApprovalGate | None = None
    budget: BudgetLimits | None = None
    summary_max_tokens: int = 1024
    """The explicit ``max_tokens`` of the one summary call made when a budget runs out."""
    budget_gate: BudgetGate | None = None
    """The gate every model call reserves from (core/budget_gate.py); ``None``: a new one
    for ``budget`` per run. Given to share one cap (a cell's flush, a delegated child)."""
    prices: PriceFn | None = None
    """Model name to price, for the gate's worst case; ``None``: prices unknown."""
    on_budget_exhausted: (
        Callable[[BudgetStop], MaybeAwaitable[Literal["continue", "summarize"]]] | None
    ) = None
    """Asked when a limit is reached, before the summary call: ``"continue"`` raises that
    limit by ``BudgetStop.step`` and the run goes on; ``None`` (headless): summarize."""
    options: dict[str, Any] = field(default_factory=dict)
    """Passed through to the stream function (temperature, provider options...)."""
    compaction: CompactionSettings | None = None
    """When and how the run compacts its transcript; ``None``: never (see _run/compact.py)."""
    notes: NotesFn | None = None
    """The caller's ephemeral notes, asked before each model call (core/notes.py)."""
    result_limit: int | None = None
    """Tool result text over this many characters is spilled to ``result_store``."""
    result_store: ResultStore | None = None
