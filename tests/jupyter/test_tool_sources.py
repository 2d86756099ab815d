"""The one assembler of a cell's tools (jupyter/cell/tool_sources.py): which source a
``--tools`` name goes to, and a name two sources both give kept by the first."""

from __future__ import annotations

import pytest

from mibyan_jupyter.core.tools import Tool, tool
from mibyan_jupyter.jupyter.cell.tool_sources import (
    first_of_each_name,
    mcp_groups,
    plugin_groups,
)
from mibyan_jupyter.jupyter.kernel_tools import parse_groups


def named(name: str, answer: str) -> Tool:
    @tool(name=name)
    def made() -> str:
        """A tool that says which source it came from."""
        return answer

    return made


def test_a_later_tool_with_a_taken_name_is_left_out_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, clash, other = named("read_file", "kernel"), named("read_file", "plugin"), named("x", "")
    assert first_of_each_name([first, clash, other]) == [first, other]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "mibyan: tool 'read_file' is left out: an earlier tool group has a tool of that name"
    ]


def test_each_name_goes_to_its_source() -> None:
    groups = parse_groups("default,clarify,mcp:GitHub,wx", plugins=lambda: ["wx"])
    assert groups == ("inspect", "python", "files", "clarify", "mcp:GitHub", "wx")
    assert mcp_groups(groups) == ("mcp:GitHub",)
    assert plugin_groups(groups) == ("wx",)
    assert plugin_groups(parse_groups("all")) == ()


def test_plugins_are_looked_up_only_for_a_name_that_is_not_built_in() -> None:
    def never() -> list[str]:
        raise AssertionError("entry points read for built-in names")

    assert parse_groups("all,mcp", plugins=never)[-1] == "mcp"
    with pytest.raises(ValueError, match=r"unknown tool group 'wether'.*allowed: .*weather"):
        parse_groups("wether", plugins=lambda: ["weather"])
