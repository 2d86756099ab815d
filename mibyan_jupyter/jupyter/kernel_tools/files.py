"""The "files" group: ``read_file``, ``list_folder`` (read-only) and ``write_file``, all
confined to the notebook's folder (see ``paths.py``).

Plain sync tools: they run in a worker thread, which is right for file I/O and never
touches the user's namespace. Problems the model can fix (a wrong name, a folder where a
file was expected, a file that exists) come back as error results saying what to do next.

File names that are not valid UTF-8 (Python decodes their bytes as lone surrogates, which
no request or store write could encode) are shown with U+FFFD in place of the bad bytes
and marked; a path the model gives back with U+FFFD in it is matched to the real name when
exactly one entry fits (docs/architecture.md, "Decisions").
"""

from __future__ import annotations

import difflib
import mimetypes
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

from mibyan_jupyter.core.safe_text import REPLACEMENT, clean_text, is_clean
from mibyan_jupyter.core.tools import Tool, ToolResult, tool
from mibyan_jupyter.jupyter.kernel_tools.paths import PathOutsideRootError, inside, shown
from mibyan_jupyter.jupyter.kernel_tools.text import human_size, plural
from mibyan_jupyter.secrets import REDACT

READ_LIMIT = 200_000
FOLDER_LIMIT = 300
"""Entries listed per folder at most."""
_SNIFF = 8_192


def _error(message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True)


def _missing(root: Path, target: Path, path: str) -> ToolResult:
    parent = target.parent
    if not parent.is_dir():
        return _error(f"Not found: {path!r} (its folder does not exist either).")
    names = sorted(clean_text(entry.name) for entry in os.scandir(parent))
    close = difflib.get_close_matches(target.name, names, n=5, cutoff=0.5)
    hint = f" Close names: {', '.join(close)}." if close else ""
    return _error(
        f"Not found: {path!r}.{hint} Use list_folder({_shown(root, parent)!r}) to see what exists."
    )


def real_path(root: Path, path: str) -> str:
    """``path`` with each component holding U+FFFD replaced by the one entry of its folder
    whose shown name (:func:`clean_text`) it is; left as given when none or several fit."""
    if REPLACEMENT not in path:
        return path
    parts = Path(path).parts
    base = root if not Path(path).is_absolute() else Path(parts[0])
    found: list[str] = []
    for part in parts[1:] if Path(path).is_absolute() else parts:
        folder = base.joinpath(*found)
        if REPLACEMENT in part and folder.is_dir():
            fits = [name for name in os.listdir(folder) if clean_text(name) == part]
            part = fits[0] if len(fits) == 1 else part
        found.append(part)
    return str(base.joinpath(*found)) if Path(path).is_absolute() else os.path.join(*found)


def _shown(root: Path, target: Path) -> str:
    return clean_text(shown(root, target))


_NOT_UTF8 = " [the name is not valid UTF-8; use it as shown]"


def read_text(root: Path, path: str, max_chars: int) -> ToolResult:
    target = inside(root, real_path(root, path))
    if not target.exists():
        return _missing(root, target, path)
    if target.is_dir():
        return _error(f"{path!r} is a folder; use list_folder to see its contents.")
    size = target.stat().st_size
    with target.open("rb") as raw:
        sample = raw.read(_SNIFF)
    if b"\x00" in sample:
        kind = mimetypes.guess_type(target.name)[0] or "unknown type"
        return ToolResult(
            content=(
                f"{_shown(root, target)} is a binary file ({kind}, {human_size(size)}); "
                "read_file only reads text. Use run_python to load it with a suitable library."
            ),
            details={"path": _shown(root, target), "size": size, "binary": True},
        )
    with target.open(encoding="utf-8", errors="replace") as file:
        text = file.read(max_chars + 1)
    truncated = len(text) > max_chars
    if truncated:
        text = (
            f"{text[:max_chars]}\n… [truncated: the first {max_chars:,} characters of a "
            f"{human_size(size)} file; pass a larger max_chars (up to {READ_LIMIT:,}) or "
            "read parts of it with run_python]"
        )
    return ToolResult(
        content=REDACT(text),
        details={"path": _shown(root, target), "size": size, "truncated": truncated},
    )


def list_entries(root: Path, path: str) -> ToolResult:
    target = inside(root, real_path(root, path))
    if not target.exists():
        return _missing(root, target, path)
    if not target.is_dir():
        return _error(f"{path!r} is a file, not a folder; use read_file to read it.")
    entries = sorted(os.scandir(target), key=lambda e: (not _is_dir(e), e.name.lower()))
    lines = [f"{_shown(root, target)}: {plural(len(entries), 'entry', 'entries')}"]
    for entry in entries[:FOLDER_LIMIT]:
        lines.append(_entry_line(entry))
    if len(entries) > FOLDER_LIMIT:
        lines.append(f"… and {len(entries) - FOLDER_LIMIT:,} more")
    return ToolResult(content="\n".join(lines), details={"path": _shown(root, target)})


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _entry_line(entry: os.DirEntry[str]) -> str:
    """One entry, its name as valid Unicode and marked when it was not."""
    name = clean_text(entry.name)
    try:
        if entry.is_symlink():
            line = f"{name} -> {clean_text(os.readlink(entry.path))} (link)"
        elif entry.is_dir(follow_symlinks=False):
            line = f"{name}/"
        else:
            line = f"{name} ({human_size(entry.stat(follow_symlinks=False).st_size)})"
    except OSError as error:
        line = f"{name} (unreadable: {error.strerror})"
    return line if is_clean(entry.name) else line + _NOT_UTF8


def write_text(root: Path, path: str, content: str, overwrite: bool) -> ToolResult:
    target = inside(root, path)
    if target.is_dir():
        return _error(f"{path!r} is a folder; give a file name inside it.")
    existed = target.exists()
    if existed and not overwrite:
        return _error(
            f"{path!r} already exists ({human_size(target.stat().st_size)}); nothing was "
            "written. Read it first if needed; to replace it call write_file with "
            "overwrite=true, or choose another name."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    target.write_bytes(data)
    verb = "Replaced" if existed else "Created"
    return ToolResult(
        content=f"{verb} {_shown(root, target)} ({plural(len(data), 'byte')}).",
        details={"path": _shown(root, target), "bytes": len(data), "created": not existed},
    )


def file_tools(*, root: Path) -> list[Tool]:
    root = root.resolve()

    @tool(side_effects=False)
    def read_file(
        path: str, max_chars: Annotated[int, Field(ge=1, le=READ_LIMIT)] = 20_000
    ) -> ToolResult:
        """Read a text file in the notebook's folder (or a subfolder). Long files are cut
        at max_chars with a note; binary files are reported with their type and size.

        Args:
            path: The file's path, relative to the notebook's folder.
            max_chars: The most characters to return.
        """
        try:
            return read_text(root, path, max_chars)
        except (PathOutsideRootError, OSError) as error:
            return _error(str(error))

    @tool(side_effects=False)
    def list_folder(path: str = ".") -> ToolResult:
        """List a folder inside the notebook's folder: subfolders first (ending in "/"),
        then files with their sizes, and symbolic links with their targets.

        Args:
            path: The folder, relative to the notebook's folder ("." is the notebook's folder).
        """
        try:
            return list_entries(root, path)
        except (PathOutsideRootError, OSError) as error:
            return _error(str(error))

    @tool(sequential=True)
    def write_file(path: str, content: str, overwrite: bool = False) -> ToolResult:
        """Write a text file (UTF-8) in the notebook's folder or a subfolder, creating
        missing folders. An existing file is only replaced when overwrite is true.

        Args:
            path: The file's path, relative to the notebook's folder.
            content: The complete text of the file.
            overwrite: Replace the file if it already exists.
        """
        try:
            return write_text(root, path, content, overwrite)
        except (PathOutsideRootError, OSError) as error:
            return _error(str(error))

    return [read_file, list_folder, write_file]
