"""``ToolGroup``: tools a package ships for ``%%agent`` cells, under one ``--tools`` name.

Why a group and not loose tools: the user enables tools by group (``--tools
default,weather``), so a plugin names its group, says what it is for, and says which of
its tools may run without asking. That last part is the group's, not each tool's: every
tool of a group asks for approval under the default policy (``side_effects=True``)
unless the group lists it in ``read_only`` (a tool's own ``side_effects=False`` is not
enough), so what a plugin lets run freely is written in one place and shown by ``%agent
tools``. "Read-only" never goes beyond the user's policy: it is the hint the policy reads
for the built-in read-only tools (``list_variables``, ``read_file``), so the user's deny
rules, ``--approve deny`` and a tool policy still decide first (docs/architecture.md,
"Tools from outside").

Pure data and checks: the entry points that find groups are read by
:mod:`mibyan_jupyter.jupyter.plugins`, outside the core.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .tools import Tool

GROUP_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
"""What a group name may be: lowercase, as ``--tools`` reads names case-insensitively."""
RESERVED_WORDS = frozenset({"all", "none", "default"})
"""Words ``--tools`` gives a meaning of its own; no group may take them."""


class ToolGroupError(ValueError):
    """A group that cannot be used: a bad name, no tools, a read-only name it lacks."""


def check_group_name(name: object) -> str:
    """``name`` if a plugin group may take it, else :class:`ToolGroupError` saying why."""
    if not isinstance(name, str) or not GROUP_NAME.fullmatch(name):
        raise ToolGroupError(
            f"group name {name!r} must be lowercase letters, digits, '_' or '-', "
            "starting with a letter (at most 64)"
        )
    if name in RESERVED_WORDS:
        raise ToolGroupError(f"group name {name!r} is a word of --tools itself")
    if name.startswith("mcp"):
        raise ToolGroupError(f"group name {name!r} starts with 'mcp', kept for MCP servers")
    return name


@dataclass(frozen=True)
class ToolGroup:
    """A named set of tools, e.g. what a plugin's entry point names::

        @tool(side_effects=False)
        def forecast(city: str) -> str:
            "Tomorrow's weather in a city."
            ...

        group = ToolGroup(
            "weather", "Weather forecasts", [forecast, set_alert], read_only={"forecast"}
        )

    ``read_only``: the names of the tools the default policy runs without asking; every
    other tool asks (its ``side_effects`` is set to ``True`` in :attr:`tools`)."""

    name: str
    description: str
    tools: tuple[Tool, ...]
    read_only: frozenset[str] = field(default_factory=frozenset)

    def __init__(
        self,
        name: str,
        description: str,
        tools: Iterable[Tool],
        *,
        read_only: Iterable[str] = (),
    ) -> None:
        check_group_name(name)
        if not isinstance(description, str):
            raise ToolGroupError(f"group {name!r}: the description must be text")
        listed = tuple(tools)
        if not listed or not all(isinstance(item, Tool) for item in listed):
            raise ToolGroupError(f"group {name!r}: tools must be a non-empty list of Tool")
        free = frozenset(read_only)
        names = [item.name for item in listed]
        if unknown := sorted(free - set(names)):
            raise ToolGroupError(f"group {name!r}: read_only names no tool of it: {unknown}")
        if len(set(names)) != len(names):
            raise ToolGroupError(f"group {name!r}: two of its tools have the same name")
        marked = tuple(
            item
            if item.side_effects == (item.name not in free)
            else dataclasses.replace(item, side_effects=item.name not in free)
            for item in listed
        )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", " ".join(description.split()))
        object.__setattr__(self, "tools", marked)
        object.__setattr__(self, "read_only", free)

    def asks(self) -> tuple[str, ...]:
        """The tools that ask for approval under the default policy."""
        return tuple(item.name for item in self.tools if item.side_effects)
