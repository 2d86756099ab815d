"""The "inspect" group: list_variables and describe_variable on real pandas, numpy and
IPython objects."""

from __future__ import annotations

import _thread
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.core import AbortSignal, Agent, Tool, ToolResult
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.variables import LIST_LIMIT


async def run(tool: Tool, **args: Any) -> ToolResult:
    value = tool.execute("call", tool.validate(args), AbortSignal(), lambda _: None)
    result = await value if tool.is_async else value
    assert isinstance(result, ToolResult)
    return result


def tools_for(namespace: dict[str, Any], **options: Any) -> dict[str, Tool]:
    tools = kernel_tools(["inspect"], namespace=namespace, root=Path.cwd(), **options)
    return {t.name: t for t in tools}


def sample_namespace() -> dict[str, Any]:
    return {
        "df": pd.DataFrame({"price": [1.5, 2.5, None], "city": ["Oslo", "Rome", "Lima"]}),
        "arr": np.arange(12, dtype=np.float64).reshape(3, 4),
        "series": pd.Series([1, 2, 3], name="n"),
        "config": {"alpha": 0.5, "beta": [1, 2]},
        "words": ["a", "b", "c", "d"],
        "count": 7,
        "_private": 1,
        "np": np,  # a module
        "os": os,
        "In": [],
        "Out": {},
        "exit": object(),
        "get_ipython": lambda: None,
        "agent_class": Agent,  # this package's own objects
        "make_tools": kernel_tools,
    }


async def test_list_variables_names_types_shapes_and_sizes() -> None:
    namespace = sample_namespace()
    result = await run(tools_for(namespace)["list_variables"])
    assert not result.is_error
    assert isinstance(result.content, str)
    lines = result.content.splitlines()
    assert lines[0].startswith("6 variables")
    assert lines[1:] == [
        "arr: numpy.ndarray, (3, 4), 96 B",
        f"config: dict, len 2, {sys.getsizeof(namespace['config'])} B",
        f"count: int, {sys.getsizeof(7)} B",
        f"df: pandas.DataFrame, (3, 2), {namespace['df'].memory_usage(deep=False).sum()} B",
        "series: pandas.Series, (3,), 24 B",
        f"words: list, len 4, {sys.getsizeof(namespace['words'])} B",
    ]
    assert result.details is not None
    variables = result.details["variables"]
    assert isinstance(variables, list)
    assert variables[0] == {"name": "arr", "type": "numpy.ndarray", "shape": "(3, 4)", "size": 96}
    json.dumps(result.details)  # storable


async def test_list_variables_hides_what_the_shell_hid_unless_rebound(
    shell: InteractiveShell,
) -> None:
    namespace = shell.user_ns
    namespace.update(answer=42)
    tools = tools_for(namespace, shell=shell)
    listing = await run(tools["list_variables"])
    assert listing.content == "1 variable (name: type, shape or length, size in memory; " + (
        f"sizes of containers are shallow):\nanswer: int, {sys.getsizeof(42)} B"
    )
    namespace["open"] = "my own open"  # rebinding a hidden name makes it the user's
    listing = await run(tools["list_variables"])
    assert isinstance(listing.content, str)
    assert "open: str" in listing.content


async def test_list_variables_empty_and_capped() -> None:
    empty = await run(tools_for({"__name__": "__main__"})["list_variables"])
    assert empty.content == "No user variables are defined yet."
    many = {f"v{i:04d}": i for i in range(LIST_LIMIT + 25)}
    result = await run(tools_for(many)["list_variables"])
    assert isinstance(result.content, str)
    assert "v0000: int" in result.content
    assert f"v{LIST_LIMIT - 1:04d}" in result.content
    assert f"v{LIST_LIMIT:04d}" not in result.content
    assert "… and 25 more" in result.content


async def test_list_variables_survives_objects_that_raise() -> None:
    class Hostile:
        @property
        def shape(self) -> tuple[int, ...]:
            raise RuntimeError("no shape for you")

        def __len__(self) -> int:
            raise RuntimeError("no len either")

    result = await run(tools_for({"thing": Hostile()})["list_variables"])
    assert isinstance(result.content, str)
    assert "thing: " in result.content
    assert "Hostile" in result.content


async def test_describe_dataframe() -> None:
    result = await run(tools_for(sample_namespace())["describe_variable"], name="df")
    assert not result.is_error
    text = result.content
    assert isinstance(text, str)
    assert text.startswith("df: pandas.DataFrame, (3, 2)")
    assert "3 rows, 2 columns" in text
    assert "price: float64 (1 null)" in text
    assert "city: " in text
    assert "(0 null)" in text
    assert "First 5 rows:" in text
    assert "Oslo" in text
    assert "Lima" in text
    assert "Statistics (describe()):" in text
    assert "mean" in text
    assert "2.000000" in text


async def test_describe_series_array_containers_and_others() -> None:
    tools = tools_for(sample_namespace() | {"nan_array": np.array([np.nan, np.nan])})
    describe = tools["describe_variable"]
    series = (await run(describe, name="series")).content
    assert isinstance(series, str)
    assert "name 'n', dtype int64, 3 values, 0 null" in series
    assert "mean" in series
    array = (await run(describe, name="arr")).content
    assert isinstance(array, str)
    assert "dtype float64, 12 elements" in array
    assert "min 0.0, max 11.0, mean 5.5" in array
    all_nan = (await run(describe, name="nan_array")).content  # no warning escapes
    assert isinstance(all_nan, str)
    assert "min nan, max nan" in all_nan
    mapping = (await run(describe, name="config")).content
    assert isinstance(mapping, str)
    assert "2 items; the first 2:" in mapping
    assert "'beta': [1, 2]" in mapping
    listing = (await run(describe, name="words")).content
    assert listing == f"words: list, len 4, {sys.getsizeof(['a', 'b', 'c', 'd'])} B\n" + (
        "4 items; the first 4:\n  'a'\n  'b'\n  'c'\n  'd'"
    )
    function = (await run(describe, name="make_tools")).content
    assert isinstance(function, str)
    assert "kernel_tools(groups: 'Iterable[str]', *, namespace" in function


async def test_describe_truncates_long_reprs_and_large_containers() -> None:
    class Big:
        def __init__(self) -> None:
            self.rows = 10
            self.label = "big"

        def __repr__(self) -> str:
            return "Big(" + "x" * 50_000 + ")"

    namespace = {"big": Big(), "numbers": list(range(100_000)), "text": "y" * 30_000}
    describe = tools_for(namespace)["describe_variable"]
    big = (await run(describe, name="big")).content
    assert isinstance(big, str)
    assert len(big) < 1_500
    assert "Attributes: rows, label" in big
    numbers = (await run(describe, name="numbers")).content
    assert isinstance(numbers, str)
    assert "100,000 items; the first 10:" in numbers
    assert "  9" in numbers
    assert "  10\n" not in numbers
    text = (await run(describe, name="text")).content
    assert isinstance(text, str)
    assert len(text) < 1_200


async def test_describe_unknown_name_suggests_close_names() -> None:
    describe = tools_for(sample_namespace())["describe_variable"]
    result = await run(describe, name="dff")
    assert result.is_error
    assert result.content == (
        "No variable named 'dff' in the notebook. Did you mean: df? "
        "Call list_variables to see the variables that exist."
    )
    nothing_close = await run(describe, name="zzzzzz")
    assert nothing_close.is_error
    assert isinstance(nothing_close.content, str)
    assert "Did you mean" not in nothing_close.content


async def test_describe_attribute_path() -> None:
    describe = tools_for(sample_namespace())["describe_variable"]
    columns = await run(describe, name="df.columns")
    assert isinstance(columns.content, str)
    assert columns.content.startswith("df.columns: pandas.Index, (2,)")
    missing = await run(describe, name="df.colums")
    assert missing.is_error
    assert missing.content == "df (DataFrame) has no attribute 'colums'."


async def test_kernel_interrupt_during_describe_reports_it() -> None:
    class Slow:
        def __repr__(self) -> str:
            _thread.interrupt_main()  # what Kernel > Interrupt does to the loop thread
            while True:
                pass

    interrupts: list[bool] = []
    describe = tools_for({"slow": Slow()}, on_interrupt=lambda: interrupts.append(True))[
        "describe_variable"
    ]
    saved = signal.signal(signal.SIGINT, lambda number, frame: None)  # as in an async cell
    try:
        result = await run(describe, name="slow")
    finally:
        signal.signal(signal.SIGINT, saved)
    assert result.is_error
    assert isinstance(result.content, str)
    assert result.content.startswith("Interrupted")
    assert interrupts == [True]
