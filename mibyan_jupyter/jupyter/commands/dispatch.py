"""``%agent <command>``: the table of commands, and the dispatch that answers help
requests from the reference (:mod:`.reference`), turns store and usage errors into
one-line errors and shows several results each as itself."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, NoReturn

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.cell.sessions import user_facing
from mibyan_jupyter.jupyter.commands import context, control, mcp, memory, review, sessions, tools
from mibyan_jupyter.jupyter.commands.reference import COMMANDS_HELP, command_help

HELP_WORDS = ("help", "--help", "-h", "?")

COMMANDS: dict[str, Callable[[list[str]], Any]] = {
    "sessions": sessions.sessions,
    "resume": sessions.resume,
    "fork": sessions.fork,
    "export": sessions.export,
    "stop": control.stop,
    "status": control.status,
    "policy": control.policy,
    "config": control.config,
    "models": control.models,
    "delete": sessions.delete,
    "memory": memory.memory,
    "mcp": mcp.mcp,
    "tools": tools.tools,
    "review": review.review,
    "compact": context.compact,
    "pin": context.pin,
    "pins": context.pins,
    "unpin": context.unpin,
}
"""Every command but ``help`` (answered by :func:`help_text`), in the reference's order."""


def help_text(words: list[str]) -> str | None:
    """The help ``words`` ask for, else ``None``: ``help`` / ``--help`` alone (every
    command), ``help NAME`` or ``NAME --help`` (one). Only a lone trailing ``--help``
    counts, so ``%agent pin always pass -h`` pins its text."""
    if not words or (words[0] in HELP_WORDS and len(words) == 1):
        return COMMANDS_HELP
    if words[0] in HELP_WORDS and len(words) == 2:
        return command_help(words[1]) or _unknown(words[1])
    if len(words) == 2 and words[1] in HELP_WORDS[1:] and words[0] in COMMANDS:
        return command_help(words[0])
    return None


def _unknown(name: str) -> NoReturn:
    raise AgentUsageError(
        f"unknown command {name!r}: one of {', '.join([*COMMANDS, 'help'])} (see %agent help)"
    )


def run_command(line: str) -> Any:
    """Dispatch ``%agent <line>``; store and usage errors become one-line errors."""
    from mibyan_jupyter.store.db import StoreError

    try:
        words = shlex.split(line)
    except ValueError as error:
        raise AgentUsageError(f"cannot read the arguments: {error}") from None
    shown = help_text(words)
    if shown is not None:
        print(shown)
        return None
    command = COMMANDS.get(words[0])
    if command is None:
        _unknown(words[0])
    try:
        result = command(words[1:])
    except StoreError as error:
        raise user_facing(error) from None
    if isinstance(result, list):  # several rich outputs: each shown as itself, not a list repr
        from IPython.display import display

        for item in result:
            display(item)  # type: ignore[no-untyped-call]
        return None
    return result
