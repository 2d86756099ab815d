"""Tool plugins: packages that give ``%%agent`` cells a tool group through an entry point.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."mibyan_jupyter.tools"]
    weather = "weather_tools:group"

where ``weather_tools.group`` is a :class:`~mibyan_jupyter.ToolGroup` named ``weather``
(or a function of no arguments that returns one). Once installed, ``%%agent --tools
default,weather`` gives the model its tools and ``%agent tools`` lists it. The entry
points are read once per kernel, only when a cell names a group that is not built in or
``%agent tools`` runs (never at ``%load_ext``); ``refresh()`` (``%agent tools
--refresh``) reads them again (docs/architecture.md, "Tools from outside").

The jupyter layer calls :func:`group_names` (``--tools`` validation, jupyter/cell/plan.py)
and :func:`plugin_tools` (jupyter/cell/tool_sources.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from mibyan_jupyter.core.tool_groups import ToolGroup
from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.plugins.entry_points import ENTRY_POINT_GROUP, Plugin, Plugins

__all__ = [
    "ENTRY_POINT_GROUP",
    "Plugin",
    "Plugins",
    "group_names",
    "installed",
    "plugin_group",
    "plugin_tools",
    "plugins",
    "refresh",
]

_KERNEL = Plugins()


def plugins() -> Plugins:
    """The kernel's one record of the installed plugins."""
    return _KERNEL


def group_names() -> list[str]:
    """The installed plugins' group names (reads the entry points the first time)."""
    return sorted(_KERNEL.found())


def installed() -> list[Plugin]:
    """The usable entry points, by group name."""
    return [plugin for _name, plugin in sorted(_KERNEL.found().items())]


def plugin_group(name: str) -> ToolGroup | None:
    """Plugin ``name``'s group, imported on first use (``None``: not usable; said once)."""
    return _KERNEL.group(name)


def plugin_tools(names: Iterable[str]) -> list[Tool]:
    """The tools of plugin groups ``names``, in order, clashes skipped (said once)."""
    return _KERNEL.tools(names)


def refresh() -> None:
    """Read the entry points again on next use (after ``pip install`` in the kernel)."""
    _KERNEL.refresh()
