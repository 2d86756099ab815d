"""Matplotlib figures a ``run_python`` call made, as PNG display outputs.

Why by object identity: a figure the code created is one that is open afterwards and was
not open before, whether it reused a closed figure's number or took a new one. The figures
that were open before are held in the snapshot, so their ids cannot be reused meanwhile.

Why close them: under the inline backend every open figure is shown again when the
``%%agent`` cell ends; the agent's figures are already in its tool result (and in the
exported notebook's code cell), so they are closed once rendered.

Only when ``matplotlib.pyplot`` is loaded (before or by the code): this never imports it.
"""

from __future__ import annotations

import base64
import io
import sys
from typing import Any


def open_figures() -> list[Any]:
    """The figures pyplot has open, in creation order (``[]`` when pyplot is not loaded)."""
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if "matplotlib.pyplot" not in sys.modules or helpers is None:
        return []
    return [manager.canvas.figure for manager in helpers.Gcf.get_all_fig_managers()]


def new_figures(before: list[Any], *, skip: frozenset[int] = frozenset()) -> list[Any]:
    """Figures open now that were not open in ``before``; ``skip`` holds ids of figures
    already shown another way (the code's last expression was the figure)."""
    known = {id(figure) for figure in before} | skip
    return [figure for figure in open_figures() if id(figure) not in known]


def figure_png(figure: Any) -> str:
    """The figure as base64 PNG text (what a notebook's ``image/png`` holds)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def figure_output(figure: Any) -> dict[str, Any]:
    """A ``display_data`` output of the figure, like the inline backend makes."""
    return {
        "output_type": "display_data",
        "data": {"image/png": figure_png(figure), "text/plain": repr(figure)},
        "metadata": {},
    }


def close(figure: Any) -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(figure)


def is_figure(value: Any) -> bool:
    return any(cls.__module__ == "matplotlib.figure" for cls in type(value).__mro__)
