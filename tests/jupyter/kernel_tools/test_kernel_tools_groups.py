"""Tool groups: parsing ``--tools``, which tools each group gives, and their flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mibyan_jupyter.jupyter.kernel_tools as kernel_tools_package
from mibyan_jupyter.jupyter.kernel_tools import (
    BUILTIN_GROUPS,
    DEFAULT_GROUPS,
    TOOL_GROUPS,
    UnknownToolGroupError,
    kernel_tools,
    parse_groups,
)

NAMES = {
    "inspect": ["list_variables", "describe_variable"],
    "python": ["run_python"],
    "files": ["read_file", "list_folder", "write_file"],
    "shell": ["run_shell"],
    "memory": ["memory_read", "memory_add", "memory_replace", "memory_remove"],
    "notebook": [
        *("list_cells", "read_cell", "insert_cell", "replace_cell_source", "delete_cell"),
        "run_cell",
    ],
}
NOTEBOOK_WRITES = {"insert_cell", "replace_cell_source", "delete_cell", "run_cell"}
SIDE_EFFECTS = {"run_python", "write_file", "run_shell"} | NOTEBOOK_WRITES
MEMORY_WRITES = {"memory_add", "memory_replace", "memory_remove"}
"""Never ask (the agent's own notes, shown and editable), but one at a time."""


def test_exported_names() -> None:
    assert sorted(kernel_tools_package.__all__) == [
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
    assert TOOL_GROUPS == ("inspect", "python", "files", "shell", "memory", "notebook")
    assert DEFAULT_GROUPS == ("inspect", "python", "files")


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("inspect,python", ("inspect", "python")),
        ("python, inspect", ("inspect", "python")),  # canonical order
        ("shell files", ("files", "shell")),
        ("PYTHON,python", ("python",)),
        ("all", BUILTIN_GROUPS),
        ("none", ()),
        ("", DEFAULT_GROUPS),
        ("  ", DEFAULT_GROUPS),
        ("default", DEFAULT_GROUPS),
        ("default,shell", ("inspect", "python", "files", "shell")),
        ("memory,default", ("inspect", "python", "files", "memory")),
    ],
)
def test_parse_groups(text: str, groups: tuple[str, ...]) -> None:
    assert parse_groups(text) == groups


@pytest.mark.parametrize("text", ["inspect,pyhton", "network", "none,python"])
def test_parse_groups_refuses_unknown_names_listing_the_allowed_ones(text: str) -> None:
    with pytest.raises(UnknownToolGroupError) as caught:
        parse_groups(text)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    for group in TOOL_GROUPS:
        assert group in message
    assert "all" in message
    assert "none" in message


def test_each_group_gives_its_tools_in_order(tmp_path: Path) -> None:
    for group, names in NAMES.items():
        tools = kernel_tools([group], namespace={}, root=tmp_path)
        assert [t.name for t in tools] == names
    everything = kernel_tools(reversed(TOOL_GROUPS), namespace={}, root=tmp_path)
    assert [t.name for t in everything] == [n for g in TOOL_GROUPS for n in NAMES[g]]
    assert kernel_tools([], namespace={}, root=tmp_path) == []


def test_unknown_group_in_kernel_tools(tmp_path: Path) -> None:
    with pytest.raises(UnknownToolGroupError, match="allowed: inspect, python, files, shell"):
        kernel_tools(["python", "web"], namespace={}, root=tmp_path)


def test_side_effect_flags_and_descriptions(tmp_path: Path) -> None:
    tools = kernel_tools(TOOL_GROUPS, namespace={}, root=tmp_path)
    for tool in tools:
        assert tool.side_effects == (tool.name in SIDE_EFFECTS), tool.name
        assert tool.sequential == (tool.name in SIDE_EFFECTS | MEMORY_WRITES), tool.name
        assert len(tool.description) > 60
        assert "Args:" not in tool.description
        for name, schema in tool.parameters.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} is undocumented"
    by_name = {t.name: t for t in tools}
    assert by_name["run_shell"].parameters["properties"]["timeout"]["minimum"] == 1
    assert by_name["run_python"].parameters["required"] == ["code"]
    assert "ctx" not in by_name["run_shell"].parameters["properties"]
    # the tools that must run on the loop thread are async
    assert {t.name for t in tools if t.is_async} == {
        "list_variables",
        "describe_variable",
        "run_python",
        "run_shell",
    } | set(NAMES["notebook"])  # they await the front end (notebook_comm.py)


def test_importing_and_using_the_tools_loads_no_heavy_library(tmp_path: Path) -> None:
    """pandas, numpy, matplotlib and nbformat are never imported by the package itself."""
    script = f"""
import asyncio, sys
from pathlib import Path
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.jupyter.kernel_tools import TOOL_GROUPS, kernel_tools
ns = {{"x": [1, 2, 3], "name": "ada"}}
tools = {{t.name: t for t in kernel_tools(TOOL_GROUPS, namespace=ns, root=Path({str(tmp_path)!r}))}}
async def main():
    for name, args in [("list_variables", {{}}), ("describe_variable", {{"name": "x"}}),
                       ("run_python", {{"code": "print(len(x))"}})]:
        tool = tools[name]
        result = await tool.execute("c", tool.validate(args), AbortSignal(), lambda r: None)
        assert not result.is_error, result
asyncio.run(main())
print(sorted(m for m in ("pandas", "numpy", "matplotlib", "nbformat") if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "[]"
