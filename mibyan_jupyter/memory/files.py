"""The memory files: what the agent learned (``MEMORY.md``) and the user's preferences
(``USER.md``), as human-editable Markdown lists that outlive every session.

Why files and not the session store: memory belongs to the person, not to one
conversation; it should be readable and editable in any text editor, carried between
machines with the home folder, and a folder may keep its own (a course, a project) next to
its notebooks. Where they live (docs/architecture.md, "Memory"):

* ``<jupyter data dir>/mibyan/memory/`` by default (``$MIBYAN_MEMORY_DIR`` overrides);
* a folder's own ``.mibyan/`` wins when it holds the file (per-folder override).

Each file is a list of entries, one ``- entry`` line each; anything else in the file (a
heading, a note the user wrote) is kept as it is. Secrets are redacted before anything is
written; each file is capped (``MAX_CHARS``) so memory cannot crowd out the conversation.
Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mibyan_jupyter.core.safe_text import clean_text
from mibyan_jupyter.secrets import REDACT

MemoryKind = Literal["memory", "user"]
FILE_NAMES: dict[MemoryKind, str] = {"memory": "MEMORY.md", "user": "USER.md"}
HEADINGS: dict[MemoryKind, str] = {
    "memory": "# What the agent learned",
    "user": "# The user's preferences",
}
MAX_CHARS = 4_000
"""Per file: about 1,000 tokens, a small, stable part of every system prompt."""
MAX_ENTRY = 500
ENV_DIR = "MIBYAN_MEMORY_DIR"


class MemoryEditError(ValueError):
    """A memory edit that cannot be made (full, not found, empty): one line saying why."""


def default_dir() -> Path:
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override).expanduser()
    try:
        from jupyter_core.paths import jupyter_data_dir

        base = Path(jupyter_data_dir())
    except ImportError:
        base = Path.home() / ".local" / "share" / "jupyter"
    return base / "mibyan" / "memory"


def _entry_text(text: str) -> str:
    cleaned = " ".join(REDACT(clean_text(text)).split())
    if not cleaned:
        raise MemoryEditError("an empty memory entry: say what to remember")
    if len(cleaned) > MAX_ENTRY:
        raise MemoryEditError(
            f"a memory entry is at most {MAX_ENTRY} characters ({len(cleaned)} given)"
        )
    return cleaned


@dataclass(frozen=True)
class MemoryFile:
    """One memory file (it need not exist yet: reading a missing file gives no entries)."""

    kind: MemoryKind
    path: Path

    def lines(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def entries(self) -> list[str]:
        return [line[2:].strip() for line in self.lines() if line.startswith("- ")]

    def add(self, text: str) -> list[str]:
        entry = _entry_text(text)
        if entry in self.entries():
            return self.entries()  # remembering a fact twice changes nothing
        lines = self.lines() or [HEADINGS[self.kind], ""]
        self._write([*lines, f"- {entry}"])
        return self.entries()

    def replace(self, old: str, new: str) -> list[str]:
        """Replace the one entry containing ``old`` (a unique piece of it) by ``new``."""
        index = self._find(old)
        lines = self.lines()
        lines[index] = f"- {_entry_text(new)}"
        self._write(lines)
        return self.entries()

    def remove(self, old: str) -> list[str]:
        """Remove the one entry containing ``old`` (or entry number ``old``, 1-based)."""
        index = self._find(old)
        lines = self.lines()
        del lines[index]
        self._write(lines)
        return self.entries()

    def _find(self, old: str) -> int:
        """The line index of the one entry ``old`` names (its number or a unique piece)."""
        numbered = [i for i, line in enumerate(self.lines()) if line.startswith("- ")]
        if old.strip().isdigit():
            number = int(old)
            if 1 <= number <= len(numbered):
                return numbered[number - 1]
            raise MemoryEditError(f"there is no entry {number} in {self.path.name}")
        needle = old.strip()
        hits = [i for i in numbered if needle and needle in self.lines()[i]]
        if len(hits) != 1:
            how = "no entry contains" if not hits else f"{len(hits)} entries contain"
            raise MemoryEditError(f"{how} {needle!r} in {self.path.name}: quote a unique piece")
        return hits[0]

    def _write(self, lines: list[str]) -> None:
        text = "\n".join(lines).rstrip("\n") + "\n"
        if len(text) > MAX_CHARS:
            raise MemoryEditError(
                f"{self.path.name} would pass {MAX_CHARS} characters: replace or remove an "
                "entry first (%agent memory shows them)"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@dataclass(frozen=True)
class Memory:
    """The two memory files that apply to a folder: the folder's own (``.mibyan/``) where
    it has one, else the user's (``default_dir()``)."""

    base: Path
    folder: Path | None = None

    @classmethod
    def for_folder(cls, folder: Path | None = None) -> Memory:
        return cls(default_dir(), folder)

    def file(self, kind: MemoryKind) -> MemoryFile:
        name = FILE_NAMES[kind]
        if self.folder is not None:
            local = self.folder / ".mibyan" / name
            if local.exists():
                return MemoryFile(kind, local)
        return MemoryFile(kind, self.base / name)

    def snapshot(self) -> str:
        """The memory as the prompt builder's layer: both lists, empty ones left out."""
        parts = []
        titles: tuple[tuple[MemoryKind, str], ...] = (
            ("memory", "Learned"),
            ("user", "About the user"),
        )
        for kind, title in titles:
            entries = self.file(kind).entries()
            if entries:
                parts.append(f"{title}:\n" + "\n".join(f"- {e}" for e in entries))
        return "\n".join(parts)
