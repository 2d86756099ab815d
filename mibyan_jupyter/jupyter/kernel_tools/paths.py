"""Confining the file tools to the notebook's folder.

A path the model gives is resolved (symlinks followed, ``..`` collapsed) and must land in
the root folder or below it; otherwise the call is refused with an error that says why, so
the model does not retry variations. Resolving before checking is what makes a symlink
that points outside, or ``sub/../../etc``, count as outside, while ``sub/../data.csv`` is
fine.
"""

from __future__ import annotations

import os
from pathlib import Path


class PathOutsideRootError(ValueError):
    """The path leads outside the folder the file tools may use."""


def inside(root: Path, path: str) -> Path:
    """The resolved location of ``path`` (relative to ``root``, or absolute) if it is
    ``root`` or below it; else :class:`PathOutsideRootError`."""
    base = root.resolve()
    if "\x00" in path:
        raise PathOutsideRootError("The path contains a NUL character.")
    given = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    target = (given if given.is_absolute() else base / given).resolve()
    if target == base or base in target.parents:
        return target
    if given.is_absolute() or path.startswith("~"):
        why = "it is an absolute path outside that folder"
    elif ".." in given.parts:
        why = "'..' leads out of that folder"
    else:
        why = "a symbolic link on the way points outside that folder"
    raise PathOutsideRootError(
        f"Refused: {path!r} is outside the notebook's folder ({base}): {why}. "
        "Use a path relative to the notebook's folder, inside it."
    )


def shown(root: Path, target: Path) -> str:
    """``target`` as the model should name it: relative to the root, ``.`` for the root."""
    relative = target.relative_to(root.resolve())
    return relative.as_posix() if relative.parts else "."
