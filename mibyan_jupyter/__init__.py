"""mibyan-jupyter: an LLM agent that runs inside the Jupyter kernel.

The public API is re-exported from :mod:`mibyan_jupyter.core`, lazily (PEP 562): importing
this package loads nothing, so ``%load_ext mibyan_jupyter`` stays fast (the magic imports the
core, pydantic and the providers on the first ``%%agent`` cell) and scripts can use the
agent without a kernel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

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
        ToolGroup,
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
    "ToolGroup",
    "ToolResult",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        value = getattr(importlib.import_module("mibyan_jupyter.core"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mibyan_jupyter' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """``%load_ext mibyan_jupyter``: register ``%%agent``, ``%agent`` and the input
    transformer (imports only the magic; the agent loads on the first cell)."""
    from mibyan_jupyter.jupyter.entry.extension import load

    load(ipython)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    from mibyan_jupyter.jupyter.entry.extension import unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the front-end extension that queues ``%%agent`` cells."""
    return [{"src": "labextension", "dest": "mibyan-jupyter"}]
