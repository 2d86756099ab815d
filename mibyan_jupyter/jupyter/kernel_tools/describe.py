"""A description of one value, shaped by what it is: a DataFrame's schema, head and
statistics; an array's shape, dtype and range; a container's length and first items;
anything else its type and a bounded repr.

Why not just ``repr``: a model deciding how to analyse a DataFrame needs its dtypes and null
counts, which a repr does not show, and the repr of a million-row object is either useless
or huge. pandas and numpy are recognised only when already imported (``sys.modules``), so
this works, and stays light, in a kernel without them.
"""

from __future__ import annotations

import inspect
import reprlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from mibyan_jupyter.jupyter.kernel_tools.text import plural
from mibyan_jupyter.jupyter.kernel_tools.variables import summarize

ITEMS = 10
"""Items of a container shown at most."""
COLUMNS = 60
"""DataFrame columns listed with their dtype and null count at most."""
_TABLE = {"max_cols": 20, "max_colwidth": 40}

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = ITEMS
_REPR.maxstring = _REPR.maxother = 1_000


def short_repr(value: Any) -> str:
    try:
        return _REPR.repr(value)
    except Exception as error:
        return f"<repr failed: {type(error).__name__}: {error}>"


def describe(name: str, value: Any) -> str:
    """The description the model reads (unclipped): the ``list_variables`` line, then
    what the kind of value has to say."""
    return "\n".join([summarize(name, value).line(), *_body(value)])


def _body(value: Any) -> list[str]:
    pandas = sys.modules.get("pandas")
    numpy = sys.modules.get("numpy")
    if pandas is not None and isinstance(value, pandas.DataFrame):
        return _dataframe(value)
    if pandas is not None and isinstance(value, pandas.Series):
        return _series(value)
    if numpy is not None and isinstance(value, numpy.ndarray):
        return _array(numpy, value)
    if isinstance(value, Mapping):
        items = [f"  {short_repr(k)}: {short_repr(v)}" for k, v in _first(value.items())]
        return [f"{plural(len(value), 'item')}; the first {len(items)}:", *items]
    if isinstance(value, list | tuple | set | frozenset):
        items = [f"  {short_repr(item)}" for item in _first(value)]
        return [f"{plural(len(value), 'item')}; the first {len(items)}:", *items]
    if callable(value) and not isinstance(value, str):
        return _callable(value)
    return [short_repr(value), *_attributes(value)]


def _first(items: Any, count: int = ITEMS) -> list[Any]:
    """The first ``count`` items of an iterable, without materialising the rest."""
    out: list[Any] = []
    for item in items:
        if len(out) == count:
            break
        out.append(item)
    return out


def _section(title: str, make: Callable[[], str]) -> list[str]:
    try:
        return [f"{title}:", make()]
    except Exception as error:
        return [f"{title}: unavailable ({type(error).__name__}: {error})"]


def _dataframe(frame: Any) -> list[str]:
    nulls = frame.isna().sum()
    columns = [
        f"  {name!s}: {dtype} ({int(nulls[name]):,} null)"
        for name, dtype in _first(frame.dtypes.items(), COLUMNS)
    ]
    if len(frame.columns) > COLUMNS:
        columns.append(f"  … and {len(frame.columns) - COLUMNS:,} more columns")
    return [
        f"{len(frame):,} rows, {len(frame.columns):,} columns",
        "Columns (dtype, null count):",
        *columns,
        *_section("First 5 rows", lambda: frame.head(5).to_string(**_TABLE)),
        *_section("Statistics (describe())", lambda: frame.describe().to_string(**_TABLE)),
    ]


def _series(series: Any) -> list[str]:
    return [
        f"name {series.name!r}, dtype {series.dtype}, {len(series):,} values, "
        f"{int(series.isna().sum()):,} null",
        *_section("First 5 values", lambda: series.head(5).to_string()),
        *_section("Statistics (describe())", lambda: series.describe().to_string()),
    ]


def _array(numpy: Any, array: Any) -> list[str]:
    lines = [f"dtype {array.dtype}, {array.size:,} elements"]
    if array.size and array.dtype.kind in "biuf":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # all-NaN slices, overflow in mean
            low, high, mean = numpy.nanmin(array), numpy.nanmax(array), numpy.nanmean(array)
        lines.append(f"min {low}, max {high}, mean {mean:.6g}")
    preview = numpy.array2string(array, threshold=40, edgeitems=3, max_line_width=100)
    return [*lines, "Values:", preview]


def _callable(value: Any) -> list[str]:
    try:
        signature = f"{getattr(value, '__name__', type(value).__name__)}{inspect.signature(value)}"
    except (TypeError, ValueError):
        signature = short_repr(value)
    doc = inspect.getdoc(value) or ""
    summary = doc.strip().split("\n\n")[0]
    return [signature, *([summary] if summary else [])]


def _attributes(value: Any) -> list[str]:
    try:
        names = [n for n in vars(value) if not n.startswith("_")]
    except TypeError:  # no __dict__
        return []
    if not names:
        return []
    more = f" … and {len(names) - 30:,} more" if len(names) > 30 else ""
    return [f"Attributes: {', '.join(names[:30])}{more}"]
