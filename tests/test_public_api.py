"""The exported names are exactly what we mean to export, and importing the package stays
light (no Jupyter, HTTP or database library)."""

from __future__ import annotations

import subprocess
import sys

import mibyan_jupyter
import mibyan_jupyter.core

PACKAGE_API = {
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
}

CORE_API = {
    # data: messages, events, notices
    "MESSAGE_ADAPTER",
    "AGENT_EVENT_ADAPTER",
    "Message",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "TextPart",
    "ImagePart",
    "FunctionCall",
    "ToolCall",
    "Thinking",
    "Usage",
    "AgentEvent",
    "AgentStart",
    "AgentEnd",
    "TurnStart",
    "TurnEnd",
    "MessageStart",
    "MessageUpdate",
    "MessageEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolExecutionEnd",
    "ApprovalRequested",
    "ApprovalResolved",
    "BudgetStatus",
    "BudgetUpdated",
    "RetryNotice",
    "FallbackNotice",
    "CompactionNotice",
    # transcript rules
    "ModelView",
    "TranscriptError",
    "validate_transcript",
    # the loop and its configuration
    "agent_loop",
    "agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
    "AgentEventStream",
    "AgentContext",
    "LoopConfig",
    "BeforeToolCall",
    "Block",
    "AfterToolCall",
    "ResultOverride",
    "TurnContext",
    "TurnUpdate",
    "AbortSignal",
    "ModelRequest",
    "StreamEvent",
    "StreamFn",
    "ToolSpec",
    # the Agent
    "Agent",
    "AgentBusyError",
    "AgentState",
    "QueueMode",
    # tools
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolGroup",
    "current_task_id",
    "ChildRun",
    "child_approval_gate",
    "delegate_tool",
    "tool",
    # approval
    "ApprovalGate",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRule",
    "Approved",
    "Approver",
    "AutoApprove",
    "Decision",
    "Denied",
    "DenyAll",
    "PolicyOnly",
    # budgets
    "BudgetLimits",
    "BudgetTracker",
    "BudgetGate",
    "BudgetRefused",
    "BudgetStop",
    "ModelPrice",
    "Reservation",
    "DEFAULT_MAX_TURNS",
    "CHILD_MAX_TURNS",
    # fakes
    "Call",
    "Reply",
    "ScriptedModel",
    "FunctionModel",
}

HEAVY = ("IPython", "ipywidgets", "httpx", "sqlite3", "nbformat")


def test_package_all_is_exactly_the_public_api() -> None:
    assert set(mibyan_jupyter.__all__) == PACKAGE_API
    assert len(mibyan_jupyter.__all__) == len(PACKAGE_API), "duplicates in __all__"


def test_core_all_is_exactly_the_public_api() -> None:
    assert set(mibyan_jupyter.core.__all__) == CORE_API
    assert len(mibyan_jupyter.core.__all__) == len(CORE_API), "duplicates in __all__"


def test_every_exported_name_resolves() -> None:
    for module in (mibyan_jupyter, mibyan_jupyter.core):
        for name in module.__all__:
            assert getattr(module, name, None) is not None, f"{module.__name__}.{name}"


def test_package_re_exports_the_core_objects() -> None:
    for name in PACKAGE_API - {"__version__"}:
        assert getattr(mibyan_jupyter, name) is getattr(mibyan_jupyter.core, name), name
    assert mibyan_jupyter.__version__ == "0.1.0"


def test_star_import() -> None:
    namespace: dict[str, object] = {}
    exec("from mibyan_jupyter.core import *", namespace)
    assert set(namespace) - {"__builtins__"} == CORE_API


def test_import_loads_no_heavy_library() -> None:
    code = (
        "import mibyan_jupyter, mibyan_jupyter.core, sys; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert output.stdout.strip() == "[]", output.stdout + output.stderr
