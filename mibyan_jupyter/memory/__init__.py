"""Memory that outlives sessions: ``MEMORY.md`` and ``USER.md`` (Markdown lists a person can
edit), the ``memory`` tool group that reads and edits them, and the snapshot the prompt
builder puts in the system prompt (docs/architecture.md, "Memory")."""

from mibyan_jupyter.memory.files import (
    MAX_CHARS,
    Memory,
    MemoryEditError,
    MemoryFile,
    MemoryKind,
    default_dir,
)
from mibyan_jupyter.memory.tools import memory_tools

__all__ = [
    "MAX_CHARS",
    "Memory",
    "MemoryEditError",
    "MemoryFile",
    "MemoryKind",
    "default_dir",
    "memory_tools",
]
