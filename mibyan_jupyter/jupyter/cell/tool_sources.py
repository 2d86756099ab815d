"""Where a cell's tools come from: the kernel groups, the agent groups, MCP servers, plugins.

Why one assembler: ``--tools`` names groups of four kinds (docs/architecture.md, "Tools
from outside") and each kind needs different parts of the cell to build its tools: the
kernel groups the user's namespace and folder; ``clarify`` the cell's view; ``delegate``
the parent agent, its budget gate, approval gate, store writer and view; MCP servers the
kernel's one MCP hub; plugins their entry points. :func:`cell_tools` is the one place that
asks each source, in the order the model sees them: kernel tools, plugins, MCP servers,
then ``clarify`` and ``delegate`` (last, since a child's tools are a subset of all the
others).

Each source is imported only when a cell names it, so ``%load_ext`` and a cell with the
default groups never import the MCP SDK, read entry points or build the delegation parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.kernel_tools import is_mcp_group, kernel_groups, kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.groups import BUILTIN_GROUPS

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalGate
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.state import SessionHandle
    from mibyan_jupyter.jupyter.view import AgentView


@dataclass(frozen=True)
class ToolSetting:
    """What the sources may need to build one cell's tools."""

    plan: CellPlan
    agent: Agent
    approval: ApprovalGate
    namespace: dict[str, Any]
    root: Path
    shell: Any | None = None
    view: AgentView | None = None
    """The cell's live view (``None``: no view; ``clarify`` then answers that no one can)."""
    handle: SessionHandle | None = None
    """The session being run (its id and store writer), for delegated child sessions."""
    on_interrupt: Callable[[], None] | None = None


def plugin_groups(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The plugin groups of a parsed choice (neither built-in nor MCP)."""
    return tuple(g for g in groups if g not in BUILTIN_GROUPS and not is_mcp_group(g))


def mcp_groups(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The ``mcp`` / ``mcp:NAME`` entries of a parsed choice."""
    return tuple(g for g in groups if is_mcp_group(g))


def cell_tools(setting: ToolSetting) -> list[Tool]:
    """Every tool of the cell's groups, built once per cell (see the module's docstring)."""
    groups = setting.plan.groups
    tools = kernel_tools(
        kernel_groups(groups),
        namespace=setting.namespace,
        root=setting.root,
        shell=setting.shell,
        on_interrupt=setting.on_interrupt,
    )
    if plugins := plugin_groups(groups):
        from mibyan_jupyter.plugins import plugin_tools

        tools += plugin_tools(plugins)
    if servers := mcp_groups(groups):
        from mibyan_jupyter.jupyter.cell.mcp_tools import mcp_cell_tools

        tools += mcp_cell_tools(servers, setting)
    if "clarify" in groups:
        from mibyan_jupyter.jupyter.cell.clarify import clarify_tools

        tools += clarify_tools(setting)
    if "delegate" in groups:
        from mibyan_jupyter.jupyter.cell.delegation import delegate_tools

        tools += delegate_tools(setting, tuple(tools))
    return tools
