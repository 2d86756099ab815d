"""``%agent tools [--refresh]``: every tool group ``--tools`` can name, in one table.

Why one table: the groups come from four places (the kernel's own tools, the cell's
``clarify`` and ``delegate``, installed plugins, configured MCP servers) and differ in
what they may do, so the user sees for each which tools it gives, whether it is on by
default and which of its tools ask before running (docs/architecture.md, "Tools from
outside"). The kernel groups' tools are built (bound to nothing real) only to read their
names and flags, so the table cannot drift from what a cell gets. Listing imports the
installed plugins (that is what the user asked for); it never starts an MCP server
(``%agent mcp tools NAME`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.commands.common import parser
from mibyan_jupyter.jupyter.commands.tables import Table

if TYPE_CHECKING:
    from mibyan_jupyter.core.tools import Tool

ABOUT = {
    "inspect": "look at the user's variables",
    "python": "run Python in the user's namespace",
    "files": "read and write files in the notebook's folder",
    "shell": "run shell commands in the notebook's folder",
    "memory": "read and edit the memory files that outlive sessions (MEMORY.md, USER.md)",
    "notebook": "read and edit the notebook's cells (needs the front-end extension)",
}
AGENT_ROWS = (
    ("clarify", "clarify", "never asks (asking is not a side effect)", "ask the user a question"),
    ("delegate", "delegate_task", "the children's calls ask", "run child agents on sub-tasks"),
)
HEADERS = ("group", "from", "default", "tools", "approval", "what for")
Row = tuple[str, str, str, str, str, str]


def tools(words: list[str]) -> Table:
    """The table (imports the tools and plugins only now: ``%agent`` loads every command)."""
    from mibyan_jupyter.jupyter import plugins
    from mibyan_jupyter.jupyter.kernel_tools.groups import DEFAULT_GROUPS

    args = parser("tools", (("--refresh",), {"action": "store_true"})).parse_args(words)
    if args.refresh:
        plugins.refresh()
    rows = kernel_rows() + [
        (name, "built-in", "", tool, approval, about) for name, tool, approval, about in AGENT_ROWS
    ]
    rows += plugin_rows()
    mcp, mcp_note = mcp_rows()
    rows += mcp
    note = [
        f"Default (--tools default): {', '.join(DEFAULT_GROUPS)}. Add others by name: "
        "--tools default,NAME. Plugins are read once per kernel: after a pip install, "
        "%agent tools --refresh.",
        *plugins.plugins().problems,
    ]
    if mcp_note:
        note.append(mcp_note)
    return Table(HEADERS, rows, caption="Tool groups", note=" ".join(note))


def approval(listed: Sequence[Tool]) -> str:
    """Which tools ask before they run under the default policy, which run freely."""
    asks = [item.name for item in listed if item.side_effects]
    free = [item.name for item in listed if not item.side_effects]
    parts = [f"asks: {', '.join(asks)}"] if asks else []
    parts += [f"runs freely: {', '.join(free)}"] if free else []
    return "; ".join(parts)


def kernel_rows() -> list[Row]:
    from mibyan_jupyter.jupyter.kernel_tools.groups import DEFAULT_GROUPS, TOOL_GROUPS, kernel_tools

    rows: list[Row] = []
    for group in TOOL_GROUPS:
        built = kernel_tools([group], namespace={}, root=Path.cwd())
        default = "yes" if group in DEFAULT_GROUPS else ""
        names = ", ".join(item.name for item in built)
        rows.append((group, "built-in", default, names, approval(built), ABOUT.get(group, "")))
    return rows


def plugin_rows() -> list[Row]:
    from mibyan_jupyter.jupyter import plugins

    rows: list[Row] = []
    for plugin in plugins.installed():
        origin = f"plugin {plugin.package}" if plugin.package else "plugin"
        group = plugins.plugin_group(plugin.name)
        if group is None:
            rows.append((plugin.name, origin, "", "", "", "failed to load (see the note)"))
            continue
        names = ", ".join(item.name for item in group.tools)
        rows.append((plugin.name, origin, "", names, approval(group.tools), group.description))
    return rows


def mcp_rows() -> tuple[list[Row], str]:
    """One row per configured MCP server (``mcp:NAME``), and a note on what went wrong."""
    try:
        from mibyan_jupyter.mcp.config import load_config, starts
    except ImportError as error:  # the MCP configuration is not part of this install
        return [], f"MCP servers cannot be listed here ({error})."
    config = load_config(Path.cwd())
    rows: list[Row] = []
    for name, spec in config.servers.items():
        where = "MCP, this folder (asks for trust)" if config.from_folder(name) else "MCP"
        about = starts(spec) + (" (disabled)" if spec.disabled else "")
        listed = f"%agent mcp tools {name}"
        rows.append((f"mcp:{name}", where, "", listed, "asks (default policy)", about))
    return rows, " ".join(config.problems)
