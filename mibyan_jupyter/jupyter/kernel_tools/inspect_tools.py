"""The "inspect" group: ``list_variables`` and ``describe_variable``, read-only.

Both are async tools, so they run on the kernel's event loop thread, like a cell: reading a
DataFrame from a worker thread while a ``run_python`` call of the same batch mutates it on
the loop thread would race, and a user object's repr may touch the display machinery,
which is not thread-safe. A slow repr can be stopped with Kernel > Interrupt
(see ``interrupts.py``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any

from mibyan_jupyter.core.tools import Tool, ToolResult, tool
from mibyan_jupyter.jupyter.kernel_tools.describe import describe
from mibyan_jupyter.jupyter.kernel_tools.interrupts import interrupted, interruptible
from mibyan_jupyter.jupyter.kernel_tools.text import for_model
from mibyan_jupyter.jupyter.kernel_tools.variables import list_text, user_names


class UnknownVariableError(LookupError):
    """The model asked for a name the namespace does not have."""


def lookup(namespace: dict[str, Any], name: str, shell: Any | None = None) -> Any:
    """The value of ``name`` (``df`` or an attribute path ``model.coef_``), or an
    :class:`UnknownVariableError` that lists close names."""
    head, *attributes = name.strip().split(".")
    if head not in namespace:
        known = user_names(namespace, shell)
        close = difflib.get_close_matches(head, known, n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownVariableError(
            f"No variable named {head!r} in the notebook.{hint} "
            "Call list_variables to see the variables that exist."
        )
    value = namespace[head]
    for index, attribute in enumerate(attributes):
        try:
            value = getattr(value, attribute)
        except AttributeError:
            path = ".".join([head, *attributes[:index]])
            raise UnknownVariableError(
                f"{path} ({type(value).__name__}) has no attribute {attribute!r}."
            ) from None
    return value


def inspect_tools(
    *,
    namespace: dict[str, Any],
    shell: Any | None,
    on_interrupt: Callable[[], None] | None,
) -> list[Tool]:
    @tool(side_effects=False)
    async def list_variables() -> ToolResult:
        """List the user's variables in the notebook's Python kernel: name, type, shape or
        length, and size in memory. Call it first to see what data exists, then
        describe_variable for one of them."""
        with interruptible() as replaced:
            try:
                text, summaries = list_text(namespace, shell)
            except KeyboardInterrupt:
                return interrupted(on_interrupt, replaced)
        return ToolResult(
            content=for_model(text),
            details={"variables": [dataclasses.asdict(s) for s in summaries]},
        )

    @tool(side_effects=False)
    async def describe_variable(name: str) -> ToolResult:
        """Describe one variable of the notebook's Python kernel without changing it: for a
        DataFrame its shape, columns with dtypes and null counts, first rows and summary
        statistics; for an array its shape, dtype, min/max/mean and values; for a container
        its length and first items; otherwise its type and a shortened repr.

        Args:
            name: The variable's name as listed by list_variables (an attribute path such
                as `model.coef_` also works).
        """
        with interruptible() as replaced:
            try:
                text = describe(name, lookup(namespace, name, shell))
            except UnknownVariableError as error:
                return ToolResult(content=str(error), is_error=True)
            except KeyboardInterrupt:
                return interrupted(on_interrupt, replaced)
        return ToolResult(content=for_model(text))

    return [list_variables, describe_variable]
