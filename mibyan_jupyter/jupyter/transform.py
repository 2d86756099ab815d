"""The input transformer that makes a ``%%agent`` cell await its run.

A cell that blocks cannot receive widget clicks, so the cell is rewritten into a top-level
``await`` that IPython's autoawait runs on the kernel's event loop (DESIGN.md, "Running
inside the kernel"). Help requests (``%%agent?``, ``--help``) are left to the real magic.
"""

from __future__ import annotations

from mibyan_jupyter.jupyter.options import wants_help

MAGIC = "%%agent"
RUNNER = "__import__('mibyan_jupyter.jupyter.run', fromlist=['run_cell']).run_cell"


def agent_cell_transformer(lines: list[str]) -> list[str]:
    """IPython ``input_transformers_cleanup`` hook: ``lines`` are the cell's lines."""
    if not lines:
        return lines
    first = lines[0]
    if not first.startswith(MAGIC):
        return lines
    rest = first[len(MAGIC) :]
    if rest[:1] not in ("", " ", "\t", "\n", "\r"):
        return lines  # another magic whose name starts with "agent"
    line = rest.strip()
    if wants_help(line):
        return lines
    prompt = "".join(lines[1:])
    return [f"await {RUNNER}({prompt!r}, {line!r})\n"]
