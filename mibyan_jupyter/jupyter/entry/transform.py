"""The input transformer that makes a ``%%agent`` cell await its run.

A cell that blocks cannot receive widget clicks, so the cell is rewritten into a top-level
``await`` that IPython's autoawait runs on the kernel's event loop (docs/architecture.md,
"Running inside the kernel"). Help requests (``%%agent?``, ``--help``) are left to the real
magic.
"""

from __future__ import annotations

from mibyan_jupyter.jupyter.cell.options import wants_help

MAGIC = "%%agent"
RUNNER = "__import__('mibyan_jupyter.jupyter.cell.run', fromlist=['run_cell']).run_cell"


def split_agent_cell(source: str) -> tuple[str, str] | None:
    """``(options line, prompt)`` of a ``%%agent`` cell's source, else ``None``: one reading
    for the transformer and the front end's queue message, so both see the same prompt."""
    text = source.lstrip()
    if not text.startswith(MAGIC):
        return None
    first, _, prompt = text.partition("\n")
    rest = first[len(MAGIC) :]
    if rest[:1] not in ("", " ", "\t", "\r"):
        return None  # another magic whose name starts with "agent"
    return rest.strip(), prompt


def agent_cell_transformer(lines: list[str]) -> list[str]:
    """IPython ``input_transformers_cleanup`` hook: ``lines`` are the cell's lines."""
    if not lines or not lines[0].startswith(MAGIC):
        return lines
    parts = split_agent_cell("".join(lines))
    if parts is None or wants_help(parts[0]):
        return lines
    line, prompt = parts
    return [f"await {RUNNER}({prompt!r}, {line!r})\n"]
