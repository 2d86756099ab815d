"""Reading the ``mibyan_jupyter.tools`` entry points: once per kernel, and only when asked.

Why lazily: a plugin is third-party code, and importing it costs time and may fail, so
nothing here runs at import or at ``%load_ext``; the metadata scan happens the first time
a cell names a group that is not built in (or ``%agent tools`` lists them), and a plugin's
module is imported only when its group is used or listed. Both are kept for the kernel's
life (``%agent tools --refresh`` reads them again after a ``pip install``).

Why never fail: a plugin that does not import, or names something that is not a
:class:`~mibyan_jupyter.core.tool_groups.ToolGroup`, is skipped with one line on the
cell's stderr (printed once per kernel, so a notebook user sees it where it happened and
the saved notebook keeps it), and every other plugin and tool still works. A tool whose
name a built-in tool or an earlier group already has is skipped the same way: approval
rules and saved "always" answers are keyed by tool name, so a plugin must never take a
built-in tool's name (docs/architecture.md, "Tools from outside").
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

from mibyan_jupyter.core.tool_groups import ToolGroup, ToolGroupError, check_group_name
from mibyan_jupyter.core.tools import Tool

ENTRY_POINT_GROUP = "mibyan_jupyter.tools"
AGENT_TOOL_NAMES = frozenset({"clarify", "delegate_task", "read_result"})
"""Built-in tools that are not kernel tools: the agent groups' and the spilled results'."""
Warn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Plugin:
    """One entry point of the group: ``name`` is the tool group it provides."""

    name: str
    package: str
    """The distribution that declares it ("" when unknown)."""
    value: str
    """``module:attribute`` as declared."""
    entry_point: EntryPoint


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _scan() -> Sequence[EntryPoint]:
    from importlib.metadata import entry_points

    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Plugins:
    """The kernel's view of the installed plugins (see the module's docstring)."""

    def __init__(
        self,
        *,
        scan: Callable[[], Sequence[EntryPoint]] = _scan,
        warn: Warn = _stderr,
        builtin_tools: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self._scan = scan
        self._warn = warn
        self._builtin_tools = builtin_tools or _builtin_tool_names
        self._found: dict[str, Plugin] | None = None
        self._groups: dict[str, ToolGroup | None] = {}
        self._said: set[str] = set()
        self.problems: list[str] = []
        """Every line said since the last refresh, for ``%agent tools``."""

    def refresh(self) -> None:
        """Forget what was read: the next call scans the entry points again."""
        import importlib

        importlib.invalidate_caches()
        self._found = None
        self._groups.clear()
        self._said.clear()
        self.problems.clear()

    def _say(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self.problems.append(line)
            self._warn(line)

    def found(self) -> dict[str, Plugin]:
        """The usable entry points by group name (scanned once)."""
        if self._found is None:
            self._found = self._read()
        return self._found

    def _read(self) -> dict[str, Plugin]:
        from mibyan_jupyter.jupyter.kernel_tools.groups import BUILTIN_GROUPS

        try:
            points = self._scan()
        except Exception as error:  # broken metadata must not break a cell
            self._say(f"mibyan: could not read the {ENTRY_POINT_GROUP} plugins: {_describe(error)}")
            return {}
        found: dict[str, Plugin] = {}
        for point in points:
            dist = getattr(point, "dist", None)
            plugin = Plugin(point.name, getattr(dist, "name", "") or "", point.value, point)
            where = f"plugin {point.name!r} ({plugin.package or '?'}: {point.value})"
            try:
                check_group_name(point.name)
            except ToolGroupError as error:
                self._say(f"mibyan: {where} skipped: {error}")
                continue
            if point.name in BUILTIN_GROUPS:
                self._say(f"mibyan: {where} skipped: {point.name!r} is a built-in group")
            elif point.name in found:
                first = found[point.name].package or "?"
                self._say(f"mibyan: {where} skipped: {first} already provides {point.name!r}")
            else:
                found[point.name] = plugin
        return found

    def group(self, name: str) -> ToolGroup | None:
        """The group of plugin ``name``, imported once (``None``: unknown or broken)."""
        if name not in self._groups:
            plugin = self.found().get(name)
            self._groups[name] = None if plugin is None else self._load(plugin)
        return self._groups[name]

    def _load(self, plugin: Plugin) -> ToolGroup | None:
        where = f"plugin {plugin.name!r} ({plugin.package or '?'}: {plugin.value})"
        try:
            value: Any = plugin.entry_point.load()
            if not isinstance(value, ToolGroup) and callable(value):
                value = value()
        except (Exception, SystemExit) as error:  # third-party code: anything may happen
            self._say(f"mibyan: {where} failed to load: {_describe(error)}")
            return None
        if not isinstance(value, ToolGroup):
            kind = type(value).__name__
            self._say(f"mibyan: {where} skipped: it gave a {kind}, not a ToolGroup")
            return None
        if value.name != plugin.name:
            self._say(f"mibyan: {where} skipped: its ToolGroup is named {value.name!r}")
            return None
        return value

    def tools(self, names: Iterable[str]) -> list[Tool]:
        """The tools of the groups ``names`` in that order; a tool whose name is taken
        (by a built-in tool or an earlier group) is skipped with one line."""
        taken = {name: "a built-in tool" for name in self._builtin_tools()}
        chosen: list[Tool] = []
        for name in names:
            group = self.group(name)
            for item in group.tools if group is not None else ():
                if item.name in taken:
                    self._say(
                        f"mibyan: tool {item.name!r} of plugin {name!r} skipped: "
                        f"{taken[item.name]} has that name"
                    )
                    continue
                taken[item.name] = f"plugin {name!r}"
                chosen.append(item)
        return chosen


_BUILTIN: frozenset[str] | None = None


def _builtin_tool_names() -> frozenset[str]:
    """Every built-in tool's name: the kernel groups' tools (built, unbound to anything
    real, to read their names) and :data:`AGENT_TOOL_NAMES`."""
    global _BUILTIN
    if _BUILTIN is None:
        from pathlib import Path

        from mibyan_jupyter.jupyter.kernel_tools.groups import TOOL_GROUPS, kernel_tools

        built = kernel_tools(TOOL_GROUPS, namespace={}, root=Path.cwd())
        _BUILTIN = frozenset(item.name for item in built) | AGENT_TOOL_NAMES
    return _BUILTIN
