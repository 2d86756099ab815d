"""The input transformer that makes a ``%%agent`` cell await its run.

A cell that blocks cannot receive widget clicks, so the cell is rewritten into a top-level
``await`` that IPython's autoawait runs on the kernel's event loop (docs/architecture.md,
"Running inside the kernel"). ``%%agent?`` is left to IPython's help; ``%%agent --help``
(or ``-h``) becomes a call that prints the options, because IPython refuses a cell magic
whose body is empty before the magic could print anything, and the help is most often
asked for alone in a cell.
"""

from __future__ import annotations

from mibyan_jupyter.jupyter.cell.options import wants_help

MAGIC = "%%agent"
RUNNER = "__import__('mibyan_jupyter.jupyter.cell.run', fromlist=['run_cell']).run_cell"
HELP = "print(__import__('mibyan_jupyter.jupyter.cell.options', fromlist=['USAGE']).USAGE)\n"


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
    if parts is None:
        return lines
    line, prompt = parts
    if wants_help(line):
        return [HELP]
    return [f"await {RUNNER}({prompt!r}, {line!r})\n"]
