"""What every ``%agent`` command shares: an argument parser whose errors are one-line usage
errors, the short forms of ids, times and costs in tables, and reading a session argument."""

from __future__ import annotations

import argparse
import time
from typing import Any, NoReturn

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.reference import BY_NAME, undocumented
from mibyan_jupyter.jupyter.state import kernel_state, notebook_path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        entry = BY_NAME.get(self.prog)
        usage = f"usage: {entry.usage()}" if entry else "see %agent help"
        raise AgentUsageError(f"%agent {self.prog}: {message} ({usage})")


def parser(
    name: str, *arguments: tuple[tuple[str, ...], dict[str, Any]]
) -> argparse.ArgumentParser:
    """An argparse parser for ``%agent <name>`` that raises :class:`AgentUsageError` with
    the command's usage line. A flag its help entry does not document is a bug here, and
    fails the first time the command runs (the reference is the one source of truth)."""
    missing = undocumented(name, [flag for flags, _ in arguments for flag in flags])
    if missing:
        raise RuntimeError(f"%agent {name}: {', '.join(missing)} missing from its help entry")
    made = _Parser(prog=name, add_help=False)
    for flags, options in arguments:
        made.add_argument(*flags, **options)
    return made


def count(name: str, text: str, *, least: int = 1, most: int = 10_000) -> int:
    """An integer argument of a command (``--limit``, ``--at``) within its bounds, else one
    usage line: SQLite reads ``LIMIT -1`` as "no limit", so a typo would list everything."""
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if not least <= value <= most:
        raise AgentUsageError(f"{name} must be an integer from {least} to {most:,}; got {text!r}")
    return value


def short(session_id: str) -> str:
    return session_id[:8]


def when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else ""


def cost(value: float | None) -> str:
    return "" if value is None else f"${value:.4f}"


def session_id(text: str) -> str:
    """A full session id from ``current`` (this notebook's), ``last``, an id or a prefix."""
    state = kernel_state()
    if text == "current":
        current = state.current_session(notebook_path())
        if current is None:
            raise AgentUsageError("this notebook has no current session yet")
        return current
    if text == "last":
        info = state.store().last()
        if info is None:
            raise AgentUsageError("there is no session yet: run a %%agent cell first")
        return info.id
    return state.store().get(text).id
