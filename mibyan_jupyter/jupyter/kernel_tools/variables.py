"""Which of the namespace's names are the user's variables, and a one-line summary of each.

Why these exclusions: the model asks "what data is there?", so IPython's own names (``In``,
``Out``, ``get_ipython``, everything the shell hid at start-up), private names, imported
modules and this package's objects are noise. Like IPython's ``%who``, a hidden name the
user has rebound (``exit = 3``) is theirs again.

Why duck typing: the kernel may have neither pandas nor numpy, and importing them here
would cost the user a second of start-up; an object can only be a DataFrame if pandas is
already in ``sys.modules``. Every attribute read is guarded: a user object's ``shape`` or
``__len__`` may raise.
"""

from __future__ import annotations

import operator
import sys
import types
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.jupyter.kernel_tools.text import human_size, plural

IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
LIST_LIMIT = 200
"""Variables listed at most; the rest are counted."""
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Summary:
    """One variable as ``list_variables`` shows it."""

    name: str
    type: str
    shape: str | None
    """``(100, 3)`` for arrays and frames, ``len 5`` for other sized objects."""
    size: int | None
    """Bytes: ``nbytes``, a DataFrame's memory usage, else the shallow ``sys.getsizeof``."""

    def line(self) -> str:
        parts = [f"{self.name}: {self.type}"]
        if self.shape is not None:
            parts.append(self.shape)
        if self.size is not None:
            parts.append(human_size(self.size))
        return ", ".join(parts)


def user_names(namespace: Mapping[str, Any], shell: Any | None = None) -> list[str]:
    """The user's variable names, sorted case-insensitively."""
    hidden = getattr(shell, "user_ns_hidden", None)
    hidden = hidden if isinstance(hidden, Mapping) else {}
    names = []
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or name.startswith("_") or name in IPYTHON_NAMES:
            continue
        if hidden.get(name, _MISSING) is value or isinstance(value, types.ModuleType):
            continue
        if is_ours(value):
            continue
        names.append(name)
    return sorted(names, key=str.lower)


def is_ours(value: Any) -> bool:
    """Whether ``value`` (a function, class or instance) comes from this package."""
    own = (
        getattr(value, "__module__", None) if isinstance(value, type | types.FunctionType) else None
    )
    module = own if isinstance(own, str) else type(value).__module__
    return module == "mibyan_jupyter" or module.startswith("mibyan_jupyter.")


def type_name(value: Any) -> str:
    """``int``, ``pandas.DataFrame``, ``numpy.ndarray``: the class with its top package."""
    cls = type(value)
    module = cls.__module__
    if module == "builtins":
        return cls.__qualname__
    return f"{module.split('.')[0]}.{cls.__qualname__}"


def shape_of(value: Any) -> str | None:
    if isinstance(value, type):
        return None
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
            return str(shape)
        if isinstance(value, Sized):
            return f"len {len(value):,}"
    except Exception:
        return None
    return None


def size_of(value: Any) -> int | None:
    """Bytes where that is cheap to know; never walks a container."""
    try:
        pandas = sys.modules.get("pandas")
        if pandas is not None and isinstance(value, pandas.DataFrame):
            return int(value.memory_usage(deep=False).sum())
        nbytes = None if isinstance(value, type) else getattr(value, "nbytes", None)
        if nbytes is not None and not isinstance(nbytes, bool):
            return operator.index(nbytes)
        return sys.getsizeof(value)
    except Exception:
        return None


def summarize(name: str, value: Any) -> Summary:
    return Summary(name, type_name(value), shape_of(value), size_of(value))


def list_text(namespace: Mapping[str, Any], shell: Any | None = None) -> tuple[str, list[Summary]]:
    """The listing the model reads, and the summaries it was made from."""
    names = user_names(namespace, shell)
    if not names:
        return "No user variables are defined yet.", []
    shown = [summarize(name, namespace[name]) for name in names[:LIST_LIMIT]]
    lines = [
        f"{plural(len(names), 'variable')} (name: type, shape or length, size in memory; "
        "sizes of containers are shallow):"
    ]
    lines += [summary.line() for summary in shown]
    if len(names) > LIST_LIMIT:
        lines.append(f"… and {len(names) - LIST_LIMIT:,} more (use describe_variable by name).")
    return "\n".join(lines), shown
