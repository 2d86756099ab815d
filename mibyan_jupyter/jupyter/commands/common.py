"""What every ``%agent`` command shares: an argument parser whose errors are one-line usage
errors, the short forms of ids, times and costs in tables, and reading a session argument."""

from __future__ import annotations

import argparse
import time
from typing import Any, NoReturn

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.state import kernel_state, notebook_path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise AgentUsageError(f"%agent {self.prog}: {message} (see %agent --help)")


def parser(
    name: str, *arguments: tuple[tuple[str, ...], dict[str, Any]]
) -> argparse.ArgumentParser:
    """An argparse parser for ``%agent <name>`` that raises :class:`AgentUsageError`."""
    made = _Parser(prog=name, add_help=False)
    for flags, options in arguments:
        made.add_argument(*flags, **options)
    return made


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
