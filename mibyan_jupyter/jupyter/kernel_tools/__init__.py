"""Tools a ``%%agent`` cell can give the model: look at the user's variables, run Python in
their kernel, read and write files in the notebook's folder, run shell commands, read and
edit the notebook itself (through the front-end extension: ``notebook_comm.py``).

``kernel_tools(groups, namespace=..., root=...)`` builds them; ``risk_note`` adds a warning
to the approval card of a call that looks destructive. Side-effecting tools
(``run_python``, ``write_file``, ``run_shell``, the notebook's edits and runs) are
``side_effects=True`` and ask for approval under the default policy; the others are
read-only.

The names load lazily (PEP 562): ``%load_ext`` registers the notebook comm's target
(``notebook_comm.register``) without importing the tools themselves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.kernel_tools.groups import (
        AGENT_GROUPS,
        BUILTIN_GROUPS,
        DEFAULT_GROUPS,
        TOOL_GROUPS,
        UnknownToolGroupError,
        is_mcp_group,
        kernel_groups,
        kernel_tools,
        parse_groups,
    )
    from mibyan_jupyter.jupyter.kernel_tools.risk import risk_note

_WHERE = {
    "AGENT_GROUPS": "groups",
    "BUILTIN_GROUPS": "groups",
    "DEFAULT_GROUPS": "groups",
    "TOOL_GROUPS": "groups",
    "UnknownToolGroupError": "groups",
    "is_mcp_group": "groups",
    "kernel_groups": "groups",
    "kernel_tools": "groups",
    "parse_groups": "groups",
    "risk_note": "risk",
}

__all__ = [
    "AGENT_GROUPS",
    "BUILTIN_GROUPS",
    "DEFAULT_GROUPS",
    "TOOL_GROUPS",
    "UnknownToolGroupError",
    "is_mcp_group",
    "kernel_groups",
    "kernel_tools",
    "parse_groups",
    "risk_note",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
