"""Tools a ``%%agent`` cell can give the model: look at the user's variables, run Python in
their kernel, read and write files in the notebook's folder, run shell commands.

``kernel_tools(groups, namespace=..., root=...)`` builds them; ``risk_note`` adds a warning
to the approval card of a call that looks destructive. Side-effecting tools
(``run_python``, ``write_file``, ``run_shell``) are ``side_effects=True`` and ask for
approval under the default policy; the others are read-only.
"""

from mibyan_jupyter.jupyter.kernel_tools.groups import (
    DEFAULT_GROUPS,
    TOOL_GROUPS,
    UnknownToolGroupError,
    kernel_tools,
    parse_groups,
)
from mibyan_jupyter.jupyter.kernel_tools.risk import risk_note

__all__ = [
    "DEFAULT_GROUPS",
    "TOOL_GROUPS",
    "UnknownToolGroupError",
    "kernel_tools",
    "parse_groups",
    "risk_note",
]
