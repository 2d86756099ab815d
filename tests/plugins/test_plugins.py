"""Tool plugins by entry point (``mibyan_jupyter.tools``), with real distributions in a
temporary site directory on ``sys.path``: a group is found and built with the approval
its ``read_only`` says; a plugin that does not import, gives garbage, has a bad name or
takes a taken tool name is one line on stderr (once) and the others still work; entry
points are read once until ``refresh()`` (the cell and ``%agent tools``:
tests/jupyter/test_cell_plugins.py; a real kernel: tests/jupyter/test_kernel_plugins.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_support import WEATHER, add_package, plugin_site

from mibyan_jupyter import ToolGroup, tool
from mibyan_jupyter.core.tool_groups import ToolGroupError
from mibyan_jupyter.jupyter import plugins


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin site dir on sys.path; the kernel's plugin record fresh before and after."""
    where = plugin_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(where))
    plugins.refresh()
    yield where
    plugins.refresh()
    for module in ("weather_tools", "broken_tools", "loud_tools", "odd_tools", "later_tools"):
        sys.modules.pop(module, None)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_bad_entry_names_are_skipped_with_one_line_each(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plugins.group_names() == ["broken", "loud", "odd", "weather"]
    said = lines(capsys)
    assert len(said) == 3, said
    assert any("'Shouty'" in line and "lowercase" in line for line in said)
    assert any("'shell'" in line and "is a built-in group" in line for line in said)
    assert any("'mcpish'" in line and "kept for MCP servers" in line for line in said)
    assert all(line.startswith("mibyan: plugin ") and "odd-tools" in line for line in said)
    assert plugins.group_names() == ["broken", "loud", "odd", "weather"]
    assert lines(capsys) == [], "said once"
    assert "weather_tools" not in sys.modules, "listing names imports no plugin"


def test_a_group_is_built_with_the_approval_its_read_only_says(site: Path) -> None:
    (weather,) = [p for p in plugins.installed() if p.name == "weather"]
    assert (weather.package, weather.value) == ("weather-tools", "weather_tools:group")
    made = plugins.plugin_tools(["weather"])
    assert [(t.name, t.side_effects) for t in made] == [("forecast", False), ("set_alert", True)]
    assert made[0].execute("c1", made[0].validate({"city": "Oslo"}), None, None) == (  # type: ignore[arg-type]
        "Sunny in Oslo, 21 C"
    )


def test_broken_garbage_and_clashing_plugins_never_break_the_others(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins.group_names()
    capsys.readouterr()
    made = plugins.plugin_tools(["broken", "weather", "odd", "loud"])
    assert [t.name for t in made] == ["forecast", "set_alert", "shout"]
    said = lines(capsys)
    assert len(said) == 4, said
    broken, odd, builtin, clash = said
    assert broken.startswith("mibyan: plugin 'broken' (broken-tools: broken_tools:group)")
    assert "failed to load: ModuleNotFoundError: No module named" in broken
    assert "it gave a int, not a ToolGroup" in odd
    assert "tool 'read_file' of plugin 'loud' skipped: a built-in tool" in builtin
    assert "tool 'forecast' of plugin 'loud' skipped: plugin 'weather' has that name" in clash
    plugins.plugin_tools(["broken", "weather", "odd", "loud"])
    assert lines(capsys) == [], "each line is said once per kernel"
    assert plugins.plugin_group("broken") is None
    assert len(plugins.plugins().problems) == 7


def test_entry_points_are_read_once_until_refresh(site: Path) -> None:
    assert "later" not in plugins.group_names()
    source = WEATHER.replace('"weather"', '"later"')
    add_package(site, "later-tools", "later_tools", source, {"later": "later_tools:group"})
    assert "later" not in plugins.group_names(), "read once per kernel"
    plugins.refresh()
    assert "later" in plugins.group_names()
    assert [t.name for t in plugins.plugin_tools(["later"])] == ["forecast", "set_alert"]


def test_a_tool_group_checks_what_a_plugin_gives() -> None:
    @tool
    def one() -> str:
        """One."""
        return "1"

    @tool(side_effects=False)
    def two() -> str:
        """Two."""
        return "2"

    group = ToolGroup("numbers", "  Two\n numbers ", [one, two])
    assert group.description == "Two numbers"
    assert group.asks() == ("one", "two"), "a tool's own side_effects=False is not enough"
    assert two.side_effects is False, "the plugin's own tool object is not changed"
    assert ToolGroup("numbers", "", [one, two], read_only={"two"}).asks() == ("one",)
    for name in ("Numbers", "2numbers", "all", "default", "mcp", "mcpx", "", "a" * 65):
        with pytest.raises(ToolGroupError):
            ToolGroup(name, "", [one])
    with pytest.raises(ToolGroupError, match="non-empty list of Tool"):
        ToolGroup("numbers", "", [])
    with pytest.raises(ToolGroupError, match="non-empty list of Tool"):
        ToolGroup("numbers", "", [one, "two"])  # type: ignore[list-item]
    with pytest.raises(ToolGroupError, match="read_only names no tool"):
        ToolGroup("numbers", "", [one], read_only={"three"})
    with pytest.raises(ToolGroupError, match="same name"):
        ToolGroup("numbers", "", [one, one])
