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
DEFAULT_GROUPS: tuple[str, ...] = ("inspect", "python", "files")
_WORDS = "all, none, default"


class UnknownToolGroupError(ValueError):
    """A tool group name that does not exist; the message lists the allowed ones."""

    def __init__(self, name: str, *, problem: str | None = None) -> None:
        super().__init__(
            f"{problem or f'unknown tool group {name!r}'}; allowed: {', '.join(TOOL_GROUPS)} "
            f"(comma-separated), or one of: {_WORDS}"
        )
        self.name = name


def parse_groups(text: str) -> tuple[str, ...]:
    """``"inspect,python"`` -> ``("inspect", "python")``, in :data:`TOOL_GROUPS` order.

    ``"all"`` is every group, ``"none"`` no group, ``""`` and ``"default"`` the
    :data:`DEFAULT_GROUPS` (``"default,shell"`` adds to them). Names are separated by
    commas or spaces, case does not matter, repeats are ignored."""
    names = [n for n in re.split(r"[\s,]+", text.strip().lower()) if n]
    if not names:
        return DEFAULT_GROUPS
    if "none" in names:
        if len(set(names)) > 1:
            raise UnknownToolGroupError("none", problem="'none' cannot be combined with groups")
        return ()
    chosen: set[str] = set()
    for name in names:
        if name == "all":
            chosen.update(TOOL_GROUPS)
        elif name == "default":
            chosen.update(DEFAULT_GROUPS)
        elif name in TOOL_GROUPS:
            chosen.add(name)
        else:
            raise UnknownToolGroupError(name)
    return tuple(group for group in TOOL_GROUPS if group in chosen)


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
            raise UnknownToolGroupError(name)
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
