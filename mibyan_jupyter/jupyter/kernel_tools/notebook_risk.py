"""What the approval card of a notebook edit shows: a unified diff for
``replace_cell_source``, the code for ``run_cell`` (its arguments name only the cell), the
cell about to go for ``delete_cell``.

Why from the mirror: the card is built synchronously when the approval is asked
(``risk_note``, see risk.py), so there is no time for a round trip to the front end; the
front end keeps the kernel's copy of every cell's source up to date (``notebook_comm.py``,
``sync``). The edit itself then refuses when the cell changed after the card was shown
(``expected``), so what the user approved is what is replaced.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from mibyan_jupyter.jupyter.kernel_tools.notebook_comm import LINK, NotebookLink

NOTEBOOK_EDITS = frozenset({"replace_cell_source", "run_cell", "delete_cell"})
SHOWN = 4_000
"""Characters of a diff or of code the card shows (the arguments below it have the rest)."""


def notebook_risk(
    name: str,
    args: Mapping[str, Any],
    link: NotebookLink = LINK,
    code_reasons: Callable[[str], list[str]] = lambda _code: [],
) -> str | None:
    """The card's text for a notebook edit, or ``None`` for other tools. ``code_reasons``
    names what a cell's code does that deserves a warning (``risk.python_reasons``, handed
    in by :func:`.risk.risk_note`, which calls this: so the import goes one way)."""
    if name not in NOTEBOOK_EDITS:
        return None
    cell_id = str(args.get("cell_id", ""))
    old = link.sources.get(cell_id)
    if name == "replace_cell_source":
        if old is None:
            return f"Replaces the whole source of cell {cell_id} (its current text is unknown)"
        return f"Replaces the source of cell {cell_id}:\n" + _clipped(
            cell_diff(old, str(args.get("source", "")), cell_id)
        )
    if name == "run_cell":
        if old is None:
            return f"Runs the code of cell {cell_id} in your kernel (its text is unknown)"
        reasons = "; ".join(dict.fromkeys(code_reasons(old)))
        warning = f" ({reasons})" if reasons else ""
        return f"Runs cell {cell_id} in your kernel{warning}:\n" + _clipped(old)
    lines = len(old.splitlines()) if old is not None else 0
    head = f": {old.strip().splitlines()[0][:80]!r}" if old and old.strip() else ""
    return f"Deletes cell {cell_id} ({lines} lines{head})"


def cell_diff(old: str, new: str, cell_id: str = "cell") -> str:
    """``old`` -> ``new`` as a unified diff (``(no change)`` when they are equal)."""
    diff = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        fromfile=f"{cell_id} (now)",
        tofile=f"{cell_id} (proposed)",
        lineterm="",
    )
    text = "\n".join(diff)
    return text or "(no change)"


def _clipped(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + f"\n… ({len(text) - SHOWN:,} more)"
