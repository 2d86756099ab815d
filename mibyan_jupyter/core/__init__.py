"""The agent core: messages, events, the loop, the Agent, tools, approval and budgets.

Pure asyncio and pydantic: no HTTP, database, notebook or UI library is imported here
(a ruff rule enforces it), so the loop can be tested and benchmarked on its own and every
outer layer subscribes to its events.

This module is the core's face: ``__all__`` is its public API (a test pins it). The run
machinery behind ``run_agent_loop`` and the Agent lives in the private ``core/_run/``
package, which no other package imports (docs/architecture.md, "Layers").
"""

from ._run.loop import run_agent_loop, run_agent_loop_continue
from .agent import Agent, AgentBusyError, AgentState, QueueMode
from .approval import (
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalRule,
    Approved,
    Approver,
    AutoApprove,
    Decision,
    Denied,
    DenyAll,
    PolicyOnly,
)
from .budget import CHILD_MAX_TURNS, DEFAULT_MAX_TURNS, BudgetLimits, BudgetTracker
from .budget_gate import BudgetGate, BudgetRefused, BudgetStop, ModelPrice, Reservation
from .config import (
    AfterToolCall,
    AgentContext,
    BeforeToolCall,
    Block,
    LoopConfig,
    ResultOverride,
    TurnContext,
    TurnUpdate,
)
from .delegation import ChildRun, child_approval_gate, delegate_tool
from .event_stream import AgentEventStream, agent_loop, agent_loop_continue
from .events import (
    AGENT_EVENT_ADAPTER,
    AgentEnd,
    AgentEvent,
    AgentStart,
    ApprovalRequested,
    ApprovalResolved,
    BudgetStatus,
    BudgetUpdated,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from .fakes import Call, FunctionModel, Reply, ScriptedModel
from .messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    FunctionCall,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    Thinking,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .notices import CompactionNotice, FallbackNotice, RetryNotice
from .signal import AbortSignal
from .stream import ModelRequest, StreamEvent, StreamFn, ToolSpec
from .tool_groups import ToolGroup
from .tools import Tool, ToolContext, ToolRegistry, ToolResult, current_task_id, tool
from .transcript import ModelView, TranscriptError, validate_transcript

__all__ = [
    "AGENT_EVENT_ADAPTER",
    "CHILD_MAX_TURNS",
    "DEFAULT_MAX_TURNS",
    "MESSAGE_ADAPTER",
    "AbortSignal",
    "AfterToolCall",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentEventStream",
    "AgentStart",
    "AgentState",
    "ApprovalGate",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRequested",
    "ApprovalResolved",
    "ApprovalRule",
    "Approved",
    "Approver",
    "AssistantMessage",
    "AutoApprove",
    "BeforeToolCall",
    "Block",
    "BudgetGate",
    "BudgetLimits",
    "BudgetRefused",
    "BudgetStatus",
    "BudgetStop",
    "BudgetTracker",
    "BudgetUpdated",
    "Call",
    "ChildRun",
    "CompactionNotice",
    "Decision",
    "Denied",
    "DenyAll",
    "FallbackNotice",
    "FunctionCall",
    "FunctionModel",
    "ImagePart",
    "LoopConfig",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "ModelPrice",
    "ModelRequest",
    "ModelView",
    "PolicyOnly",
    "QueueMode",
    "Reply",
    "Reservation",
    "ResultOverride",
    "RetryNotice",
    "ScriptedModel",
    "StreamEvent",
    "StreamFn",
    "SystemMessage",
    "TextPart",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolGroup",
    "ToolMessage",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "TranscriptError",
    "TurnContext",
    "TurnEnd",
    "TurnStart",
    "TurnUpdate",
    "Usage",
    "UserMessage",
    "agent_loop",
    "agent_loop_continue",
    "child_approval_gate",
    "current_task_id",
    "delegate_tool",
    "run_agent_loop",
    "run_agent_loop_continue",
    "tool",
    "validate_transcript",
]
