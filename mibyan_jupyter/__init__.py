"""mibyan-jupyter: an LLM agent that runs inside the Jupyter kernel.

The public API is re-exported from :mod:`mibyan_jupyter.core`; importing this package
loads nothing Jupyter-specific, so ``%load_ext`` stays fast and scripts can use the
agent without a kernel.
"""

from .core import (
    AbortSignal,
    Agent,
    AgentContext,
    AgentEvent,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRule,
    Approved,
    AutoApprove,
    BudgetLimits,
    Denied,
    DenyAll,
    FunctionModel,
    LoopConfig,
    Message,
    PolicyOnly,
    Reply,
    ScriptedModel,
    Tool,
    ToolResult,
    agent_loop,
    agent_loop_continue,
    tool,
)

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "Agent",
    "AgentContext",
    "AgentEvent",
    "ApprovalGate",
    "ApprovalPolicy",
    "ApprovalRule",
    "Approved",
    "AutoApprove",
    "BudgetLimits",
    "Denied",
    "DenyAll",
    "FunctionModel",
    "LoopConfig",
    "Message",
    "PolicyOnly",
    "Reply",
    "ScriptedModel",
    "Tool",
    "ToolResult",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "tool",
]
