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

import sys
from typing import TYPE_CHECKING

from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
from mibyan_jupyter.jupyter.kernel_tools import is_mcp_group, kernel_groups, kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.groups import BUILTIN_GROUPS

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.view import AgentView


def plugin_groups(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The plugin groups of a parsed choice (neither built-in nor MCP)."""
    return tuple(g for g in groups if g not in BUILTIN_GROUPS and not is_mcp_group(g))


def mcp_groups(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The ``mcp`` / ``mcp:NAME`` entries of a parsed choice."""
    return tuple(g for g in groups if is_mcp_group(g))


async def prepare_sources(plan: CellPlan, view: AgentView | None) -> None:
    """What a source must do on the kernel's loop before :func:`cell_tools` (sync) builds
    the cell's tools: an MCP folder file's trust question (a click arrives through the
    loop) and the servers' start. Awaited by the cell's run before ``configure_agent``."""
    if servers := mcp_groups(plan.groups):
        from mibyan_jupyter.jupyter.cell.mcp_tools import prepare_mcp

        await prepare_mcp(servers, plan, view)


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
        from mibyan_jupyter.jupyter.plugins import plugin_tools

        tools += plugin_tools(plugins)
    if servers := mcp_groups(groups):
        from mibyan_jupyter.jupyter.cell.mcp_tools import mcp_cell_tools

        tools += mcp_cell_tools(servers, setting)
    if "clarify" in groups:
        from mibyan_jupyter.jupyter.cell.clarify import clarify_tools

        tools += clarify_tools(setting)
    tools = first_of_each_name(tools)
    if "delegate" in groups:
        from mibyan_jupyter.jupyter.cell.delegation import delegate_tools

        tools += delegate_tools(setting, tuple(tools))
    return tools


def first_of_each_name(tools: list[Tool]) -> list[Tool]:
    """``tools`` without a later tool whose name an earlier one has (one line each).

    Why: approval rules and "always" answers are keyed by tool name, so the earlier source
    (kernel tools, then plugins, then MCP servers) keeps a name, and a registry with two
    tools of one name would refuse the whole cell."""
    seen: set[str] = set()
    kept: list[Tool] = []
    for item in tools:
        if item.name in seen:
            print(
                f"mibyan: tool {item.name!r} is left out: an earlier tool group has a tool of "
                "that name",
                file=sys.stderr,
            )
            continue
        seen.add(item.name)
        kept.append(item)
    return kept
