"""``%agent memory [show | add TEXT | replace OLD NEW | remove OLD | path] [--user]``: the
memory files that outlive sessions (docs/architecture.md, "Memory"), shown and edited by the
user with the same rules the agent's memory tools follow (redacted, capped, atomic)."""

from __future__ import annotations

from pathlib import Path

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.common import parser
from mibyan_jupyter.jupyter.commands.tables import Message, Table
from mibyan_jupyter.memory import Memory, MemoryEditError, MemoryKind

ACTIONS = ("show", "add", "replace", "remove", "path")


def _memory() -> Memory:
    return Memory.for_folder(Path.cwd())


def _table(memory: Memory, kinds: tuple[MemoryKind, ...]) -> Table:
    rows: list[tuple[str, str, str]] = []
    for kind in kinds:
        file = memory.file(kind)
        entries = file.entries()
        if not entries:
            rows.append((file.path.name, "", "(empty)"))
        rows += [(file.path.name, str(n), entry) for n, entry in enumerate(entries, 1)]
    return Table(("file", "#", "entry"), rows, caption="Agent memory")


def memory(words: list[str]) -> Table | Message:
    args = parser(
        "memory",
        (("action",), {"nargs": "?", "default": "show", "choices": ACTIONS}),
        (("text",), {"nargs": "*"}),
        (("--user",), {"action": "store_true"}),
    ).parse_intermixed_args(words)  # "add --user TEXT" and "add TEXT --user" alike
    store = _memory()
    kind: MemoryKind = "user" if args.user else "memory"
    file = store.file(kind)
    try:
        if args.action == "show":
            return _table(store, (kind,) if args.user else ("memory", "user"))
        if args.action == "path":
            return Message(f"{file.path} ({'exists' if file.path.exists() else 'not written yet'})")
        if args.action == "add":
            file.add(" ".join(args.text))
        elif args.action == "remove":
            file.remove(" ".join(args.text))
        elif len(args.text) != 2:
            raise AgentUsageError(
                '%agent memory replace takes OLD and NEW: replace 2 "the new text"'
            )
        else:
            file.replace(args.text[0], args.text[1])
    except MemoryEditError as error:
        raise AgentUsageError(f"%agent memory: {error}") from None
    return _table(store, (kind,))
