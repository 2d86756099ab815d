"""``%agent <command>``: the help text, the table of commands, and the dispatch that turns
store and usage errors into one-line errors and shows several results each as itself."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.cell.sessions import user_facing
from mibyan_jupyter.jupyter.commands import context, control, memory, sessions

COMMANDS_HELP = """\
%agent sessions [--search TEXT] [--notebook] [--model M] [--limit N]
                                        list sessions, or search their messages
%agent resume last|ID                   show a session's history and continue it in the next cells
%agent fork ID [--at N]                 copy a session up to message N into a new session
%agent export ID [PATH] [--format ipynb|md] [--verify]
                                        write a session as a runnable notebook or Markdown
%agent stop                             stop the running agent
%agent status                           the current session, model, usage and database
%agent policy [show | set TOOL allow|deny|ask | reset [TOOL]]
                                        approval rules ("allow"/"deny" persist as "always")
%agent config                           the settings of %%agent cells (c.AgentMagics.*)
%agent models                           models you can use and whether their keys are set
%agent delete ID                        delete a session and its messages
%agent memory [show|add TEXT|replace OLD NEW|remove OLD|path] [--user]
                                        what the agent remembers across sessions (MEMORY.md,
                                        or USER.md with --user)
%agent compact                          summarise the older messages of the current session now
%agent pin TEXT | pins | unpin N        instructions kept in the system prompt (never summarised)
ID is a session id or its first characters, "last" or "current" (this notebook's).
A %%agent cell's options: %%agent --help"""


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
    "compact": context.compact,
    "pin": context.pin,
    "pins": context.pins,
    "unpin": context.unpin,
}


def run_command(line: str) -> Any:
    """Dispatch ``%agent <line>``; store and usage errors become one-line errors."""
    from mibyan_jupyter.store.db import StoreError

    try:
        words = shlex.split(line)
    except ValueError as error:
        raise AgentUsageError(f"cannot read the arguments: {error}") from None
    command = COMMANDS.get(words[0])
    if command is None:
        raise AgentUsageError(
            f"unknown command {words[0]!r}: one of {', '.join(COMMANDS)} (see %agent --help)"
        )
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
