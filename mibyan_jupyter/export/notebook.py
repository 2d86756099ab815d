"""A session as an nbformat v4 notebook, and a check that re-running it gives its outputs.

The notebook is what a teacher hands to students: the prompts and replies as Markdown
cells, the Python the agent ran as code cells with the outputs it got. Cells are built as
plain dicts and validated once at the end: nbformat's ``new_*_cell`` helpers validate every
cell, which made a 1,000-message export spend most of its time in the schema validator.
nbformat (~0.3-1.2 s to import) and nbclient are imported on first use.
"""

from __future__ import annotations

import copy
import errno
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.export.outputs import comparable
from mibyan_jupyter.export.render import (
    Code,
    Prose,
    SessionMeta,
    blocks,
    header,
    iso_time,
    redacted,
    redacted_meta,
    usage_dict,
)
from mibyan_jupyter.export.sanitize import sanitize_markdown

if TYPE_CHECKING:
    from nbformat import NotebookNode

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LANGUAGE_INFO = {
    "name": "python",
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "pygments_lexer": "ipython3",
    "codemirror_mode": {"name": "ipython", "version": 3},
    "nbconvert_exporter": "python",
}


@dataclass(frozen=True, slots=True)
class Difference:
    """A code cell whose output on a re-run is not the recorded one. ``recorded`` and
    ``actual`` are the normalized texts that were compared (see ``outputs.comparable``)."""

    cell_index: int
    source: str
    recorded: str
    actual: str

    def __str__(self) -> str:
        return f"cell {self.cell_index}: recorded {self.recorded!r}, re-run gave {self.actual!r}"


def export_notebook(messages: Sequence[Message], *, session: SessionMeta) -> NotebookNode:
    """The transcript as a valid nbformat v4.5 notebook (validated; raises
    ``nbformat.ValidationError`` only on a bug here). Secrets are redacted, Markdown is
    sanitized, thinking is left out."""
    import nbformat

    # nbformat ships py.typed but leaves these two functions unannotated.
    notebook: NotebookNode = nbformat.from_dict(_notebook_dict(messages, session=session))  # type: ignore[no-untyped-call]
    nbformat.validate(notebook)
    return notebook


def write_notebook(
    messages: Sequence[Message],
    path: str | os.PathLike[str],
    *,
    session: SessionMeta,
    overwrite: bool = True,
) -> Path:
    """Export and write to ``path`` atomically (see :func:`write_file`); returns the path."""
    notebook = export_notebook(messages, session=session)
    return write_file(path, notebook_text(notebook), overwrite=overwrite)


def notebook_text(notebook: NotebookNode) -> str:
    """The notebook's JSON as written to a file (ending with a newline, as Jupyter does)."""
    import nbformat

    text: str = nbformat.v4.writes(notebook)  # type: ignore[no-untyped-call]
    return text if text.endswith("\n") else text + "\n"


def write_file(path: str | os.PathLike[str], text: str, *, overwrite: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically: a reader never sees half a file, and a failed
    write leaves an existing file as it was. With ``overwrite=False`` an existing file is
    never replaced (``FileExistsError``), also when one appears while the text is written:
    the file is linked into place, which fails if the name is taken. Raises ``OSError``
    for a path that cannot be written (a folder, a missing or read-only folder, a device).
    A symbolic link is followed: the file it points to is the one written."""
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a folder", str(target))
    if target.exists() and not target.is_file():  # /dev/null, a pipe: never replaced
        raise OSError(errno.EINVAL, "it is not a regular file", str(target))
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with temporary.open("x", encoding="utf-8") as file:
            file.write(text)
        if overwrite:
            os.replace(temporary, target)
        else:
            _link_new(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _link_new(temporary: Path, target: Path) -> None:
    """Put ``temporary`` at ``target`` unless ``target`` exists; where the file system has
    no hard links, check and rename (a file appearing in between is the one race left)."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError:
        if target.exists():
            raise FileExistsError(errno.EEXIST, "it exists", str(target)) from None
        os.replace(temporary, target)


def _notebook_dict(messages: Sequence[Message], *, session: SessionMeta) -> dict[str, Any]:
    """The notebook as plain JSON-ready dicts, not validated (see :func:`export_notebook`)."""
    session = redacted_meta(session)
    title, facts = header(session)
    contents: list[str | Code] = [f"# {title}\n\n{facts}"]
    for block in blocks(redacted(messages)):
        contents.append(
            f"**{block.label}:**\n\n{block.body}" if isinstance(block, Prose) else block
        )
    prefix = re.sub(r"[^A-Za-z0-9_-]", "", session.id)[:32] or "cell"
    cells: list[dict[str, Any]] = []
    count = 0
    for index, content in enumerate(contents):
        if isinstance(content, Code):
            count += 1
            cells.append(_code_cell(f"{prefix}-{index}", content, count, session.id))
        else:
            cells.append(_markdown_cell(f"{prefix}-{index}", content))
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": dict(KERNELSPEC),
            "language_info": copy.deepcopy(LANGUAGE_INFO),
            "mibyan": _mibyan_metadata(session),
        },
        "cells": cells,
    }


def verify_notebook(
    notebook: NotebookNode,
    timeout: float = 60,
    *,
    kernel_name: str = "python3",
    cwd: str | os.PathLike[str] | None = None,
) -> list[Difference]:
    """Run a copy of ``notebook`` in a fresh kernel and list the code cells whose outputs
    differ from the recorded ones (compared as normalized text, execution counts ignored).

    ``timeout`` is per cell; a cell that exceeds it is interrupted and shows up as a
    difference. ``cwd`` is where the kernel starts (default: this process's directory).
    Needs nbclient and ipykernel (optional dependencies).
    """
    try:
        from nbclient import NotebookClient
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "verify_notebook runs the notebook again with nbclient, which is not installed:"
            " pip install nbclient ipykernel"
        ) from error
    if not any(cell.cell_type == "code" for cell in notebook.cells):
        return []
    rerun = copy.deepcopy(notebook)
    for cell in rerun.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    resources = {"metadata": {"path": os.fspath(cwd)}} if cwd is not None else {}
    client = NotebookClient(
        rerun,
        timeout=timeout,
        kernel_name=kernel_name,
        allow_errors=True,
        interrupt_on_timeout=True,
        resources=resources,
    )
    client.execute()
    differences: list[Difference] = []
    for index, (cell, fresh) in enumerate(zip(notebook.cells, rerun.cells, strict=True)):
        if cell.cell_type != "code":
            continue
        recorded, actual = comparable(cell.outputs), comparable(fresh.outputs)
        if recorded != actual:
            differences.append(Difference(index, cell.source, recorded, actual))
    return differences


def _markdown_cell(cell_id: str, markdown: str) -> dict[str, Any]:
    """A Markdown cell; each cell is rendered as its own document, so each is sanitized
    whole."""
    return {
        "cell_type": "markdown",
        "id": cell_id,
        "metadata": {},
        "source": sanitize_markdown(markdown),
    }


def _code_cell(cell_id: str, code: Code, count: int, session_id: str) -> dict[str, Any]:
    """The agent's code as a cell, marked with its session as the notebook tools mark the
    cells they insert or run (``metadata.mibyan``, kernel_tools/notebook.py)."""
    outputs = [
        {**output, "execution_count": count}
        if output["output_type"] == "execute_result"
        else output
        for output in code.outputs
    ]
    return {
        "cell_type": "code",
        "id": cell_id,
        "metadata": {"mibyan": {"session": session_id}},
        "execution_count": count,
        "source": code.source,
        "outputs": outputs,
    }


def _mibyan_metadata(session: SessionMeta) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "title": session.title,
        "model": session.model,
        "created_at": None if session.created_at is None else iso_time(session.created_at),
        "usage": usage_dict(session.usage),
        "cost": session.cost,
        "exported_at": iso_time(time.time()),
    }
