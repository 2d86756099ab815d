"""Tool groups the user enables with ``--tools``, and the factory that builds them.

Why groups: the user decides how far the agent reaches into their machine (look at
variables, run code, touch files, run commands) in one word each, instead of naming tools.
"shell" is not on by default: a command reaches beyond the notebook's folder, whereas the
default groups stay in the kernel and the notebook's folder (and ask before changing
anything). "memory" reads and edits the memory files that outlive sessions (MEMORY.md,
USER.md: mibyan_jupyter.memory). "notebook" reads and edits the notebook itself through the
front-end extension (notebook.py), so it is not on by default either.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.kernel_tools.files import file_tools
from mibyan_jupyter.jupyter.kernel_tools.inspect_tools import inspect_tools
from mibyan_jupyter.jupyter.kernel_tools.python_tool import python_tools
from mibyan_jupyter.jupyter.kernel_tools.shell import shell_tools

TOOL_GROUPS: tuple[str, ...] = ("inspect", "python", "files", "shell", "memory", "notebook")
"""The groups :func:`kernel_tools` builds (tools bound to the kernel and the folder)."""
AGENT_GROUPS: tuple[str, ...] = ("clarify", "delegate")
"""Built-in groups the cell builds itself, since they need the cell's view, budget and store:
``clarify`` asks the user a question on the cell, ``delegate`` runs child agents
(docs/architecture.md, "Tools from outside")."""
BUILTIN_GROUPS: tuple[str, ...] = TOOL_GROUPS + AGENT_GROUPS
DEFAULT_GROUPS: tuple[str, ...] = ("inspect", "python", "files")
MCP_PREFIX = "mcp"
"""``mcp`` is every enabled MCP server; ``mcp:NAME`` one server (names keep their case)."""
_WORDS = "all, none, default, mcp, mcp:NAME, or an installed plugin's group"
PluginNames = Callable[[], Iterable[str]]
"""The installed plugins' group names, read only when a name is not a built-in one."""


class UnknownToolGroupError(ValueError):
    """A tool group name that does not exist; the message lists the allowed ones."""

    def __init__(
        self, name: str, *, problem: str | None = None, plugins: Iterable[str] = ()
    ) -> None:
        allowed = ", ".join((*BUILTIN_GROUPS, *plugins))
        super().__init__(
            f"{problem or f'unknown tool group {name!r}'}; allowed: {allowed} "
            f"(comma-separated), or one of: {_WORDS}; %agent tools lists them "
            "(a plugin installed in this kernel: %agent tools --refresh)"
        )
        self.name = name


def is_mcp_group(name: str) -> bool:
    """``mcp`` or ``mcp:NAME``."""
    return name == MCP_PREFIX or name.startswith(MCP_PREFIX + ":")


def parse_groups(text: str, *, plugins: PluginNames | None = None) -> tuple[str, ...]:
    """``"inspect,python"`` -> ``("inspect", "python")``: built-in groups in
    :data:`BUILTIN_GROUPS` order, then ``mcp``/``mcp:NAME`` and plugin groups as given.

    ``"all"`` is every built-in group (MCP servers and plugins start processes or run
    third-party code, so they are named explicitly), ``"none"`` no group, ``""`` and
    ``"default"`` the :data:`DEFAULT_GROUPS` (``"default,shell"`` adds to them). Names are
    separated by commas or spaces, case does not matter (except a server's name after
    ``mcp:``), repeats are ignored. Any other name must be one of ``plugins()`` (called
    only then, so entry points are read only when a cell names a plugin)."""
    names = [n for n in re.split(r"[\s,]+", text.strip()) if n]
    mcp = MCP_PREFIX + ":"
    names = [mcp + n[len(mcp) :] if n.lower().startswith(mcp) else n.lower() for n in names]
    if not names:
        return DEFAULT_GROUPS
    if "none" in names:
        if len(set(names)) > 1:
            raise UnknownToolGroupError("none", problem="'none' cannot be combined with groups")
        return ()
    chosen: set[str] = set()
    extra: list[str] = []
    installed: list[str] | None = None
    for name in names:
        if name == "all":
            chosen.update(BUILTIN_GROUPS)
        elif name == "default":
            chosen.update(DEFAULT_GROUPS)
        elif name in BUILTIN_GROUPS:
            chosen.add(name)
        elif is_mcp_group(name):
            if name == mcp:
                raise UnknownToolGroupError(name, problem="'mcp:' needs a server's name")
            if name not in extra:
                extra.append(name)
        else:
            if installed is None:
                installed = sorted(plugins()) if plugins is not None else []
            if name not in installed:
                raise UnknownToolGroupError(name, plugins=installed)
            if name not in extra:
                extra.append(name)
    return tuple(group for group in BUILTIN_GROUPS if group in chosen) + tuple(extra)


def kernel_groups(groups: Iterable[str]) -> tuple[str, ...]:
    """The part of a parsed choice that :func:`kernel_tools` builds."""
    return tuple(group for group in groups if group in TOOL_GROUPS)


def kernel_tools(
    groups: Iterable[str],
    *,
    namespace: dict[str, Any],
    root: Path,
    shell: Any | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> list[Tool]:
    """The tools of ``groups`` (in :data:`TOOL_GROUPS` order), bound to the user's
    ``namespace`` (the kernel's ``user_ns``), the notebook's folder ``root``, the IPython
    ``shell`` if there is one, and ``on_interrupt``, called when Kernel > Interrupt stops a
    tool running on the loop thread (the caller cancels the run with it)."""
    wanted = set(groups)
    for name in wanted:
        if name not in TOOL_GROUPS:
            raise UnknownToolGroupError(name, problem=f"{name!r} is not a kernel tool group")
    tools: list[Tool] = []
    if "inspect" in wanted:
        tools += inspect_tools(namespace=namespace, shell=shell, on_interrupt=on_interrupt)
    if "python" in wanted:
        tools += python_tools(namespace=namespace, shell=shell, on_interrupt=on_interrupt)
    if "files" in wanted:
        tools += file_tools(root=root)
    if "shell" in wanted:
        tools += shell_tools(root=root)
    if "memory" in wanted:
        from mibyan_jupyter.memory import Memory, memory_tools

        tools += memory_tools(Memory.for_folder(root))
    if "notebook" in wanted:
        from mibyan_jupyter.jupyter.kernel_tools.notebook import notebook_tools

        tools += notebook_tools(namespace=namespace, shell=shell, on_interrupt=on_interrupt)
    return tools
