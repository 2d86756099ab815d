"""The ``memory`` tool group: the agent reads and edits its memory files.

Why the agent may write without asking: memory is the agent's own notebook about the work
and the user, shown on its tool card as it is written and editable by the user at any
time (``%agent memory``); it can never widen a permission (approval rules live in the
store, not in the prompt). Every write is redacted, capped and atomic (see
:mod:`.files`), and a write that cannot be made is an error result the model reads.
"""

from __future__ import annotations

from typing import Literal

from mibyan_jupyter.core.tools import Tool, tool
from mibyan_jupyter.memory.files import Memory, MemoryEditError, MemoryKind

Which = Literal["memory", "user"]


def _listing(memory: Memory, kind: MemoryKind) -> str:
    entries = memory.file(kind).entries()
    if not entries:
        return f"{memory.file(kind).path.name} is empty."
    return "\n".join(f"{n}. {entry}" for n, entry in enumerate(entries, 1))


def memory_tools(memory: Memory) -> list[Tool]:
    """The four memory tools, bound to ``memory`` (the files of the notebook's folder)."""

    @tool(side_effects=False)
    def memory_read(which: Which = "memory") -> str:
        """Read a memory file: "memory" (what you learned in earlier sessions) or "user"
        (the user's preferences). Entries are numbered.

        Args:
            which: "memory" or "user"
        """
        return _listing(memory, which)

    @tool(side_effects=False, sequential=True)
    def memory_add(text: str, which: Which = "memory") -> str:
        """Remember one fact for later sessions: a decision, a file or variable that
        matters, how the user likes things done. Keep it short and durable.

        Args:
            text: the fact, in one sentence
            which: "memory" (facts about the work) or "user" (the user's preferences)
        """
        try:
            memory.file(which).add(text)
        except MemoryEditError as error:
            return f"not saved: {error}"
        return "saved.\n" + _listing(memory, which)

    @tool(side_effects=False, sequential=True)
    def memory_replace(old: str, new: str, which: Which = "memory") -> str:
        """Replace one entry (give its number or a unique piece of its text) by new text.

        Args:
            old: the entry's number or a unique piece of it
            new: the new text of the entry
            which: "memory" or "user"
        """
        try:
            memory.file(which).replace(old, new)
        except MemoryEditError as error:
            return f"not changed: {error}"
        return "replaced.\n" + _listing(memory, which)

    @tool(side_effects=False, sequential=True)
    def memory_remove(old: str, which: Which = "memory") -> str:
        """Forget one entry of a memory file (give its number or a unique piece of its text).

        Args:
            old: the entry's number or a unique piece of it
            which: "memory" or "user"
        """
        try:
            memory.file(which).remove(old)
        except MemoryEditError as error:
            return f"not removed: {error}"
        return "removed.\n" + _listing(memory, which)

    return [memory_read, memory_add, memory_replace, memory_remove]
