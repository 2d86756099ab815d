"""``%%agent`` and ``%agent``: the magics, with their defaults as configurable traitlets.

Put defaults in an IPython profile (``c.AgentMagics.model = "anthropic:claude-sonnet-4-5"``)
or set them at run time (``%config AgentMagics.max_turns = 20``). This module imports only
IPython and traitlets: the agent, the providers and the store load on the first cell, so
``%load_ext mibyan_jupyter`` stays fast.

In a notebook, a ``%%agent`` cell never reaches :meth:`AgentMagics.agent_cell`: the input
transformer rewrites it into an ``await`` (see :mod:`.transform`) so clicks can reach the
run. The real cell magic is still there for ``run_cell_magic`` and shells without the
transformer; it cannot receive clicks while it blocks, so the policy decides approvals.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Enum, Float, Int, List, Unicode

from mibyan_jupyter.jupyter.options import USAGE, wants_help


@magics_class
class AgentMagics(Magics):
    """The agent's magics; the traits are the defaults of every ``%%agent`` cell."""

    model = Unicode(
        "", help="Default model spec; empty: the first provider with a key, else the demo model."
    ).tag(config=True)
    fallback_models = List(Unicode(), help="Models to fail over to, in order.").tag(config=True)
    system_prompt = Unicode("", help="System prompt of new sessions (empty: built-in).").tag(
        config=True
    )
    tools = Unicode("inspect,python,files", help="Default tool groups (or all / none).").tag(
        config=True
    )
    approve = Enum(
        ["ask", "auto", "deny"], "ask", help="Default approval mode (MIBYAN_APPROVE overrides)."
    ).tag(config=True)
    max_turns = Int(30, help="Most model calls per cell (0: unlimited).").tag(config=True)
    max_tokens = Int(0, help="Most tokens per cell (0: unlimited).").tag(config=True)
    max_cost = Float(0.0, help="Most US dollars per cell (0: unlimited).").tag(config=True)
    thinking = Enum(
        ["off", "minimal", "low", "medium", "high", "xhigh"], "off", help="Reasoning effort."
    ).tag(config=True)
    tool_mode = Enum(["parallel", "sequential"], "parallel", help="Tool execution.").tag(
        config=True
    )
    headless_wait = Float(
        2.0, help="Seconds to wait for a front end before the policy decides approvals."
    ).tag(config=True)
    db_path = Unicode("", help="Session database (empty: $MIBYAN_DB or the Jupyter data dir).").tag(
        config=True
    )

    @cell_magic("agent")  # type: ignore[arg-type]
    def agent_cell(self, line: str, cell: str) -> None:
        if wants_help(line):
            print(USAGE)
            return
        from mibyan_jupyter.jupyter.run import run_cell

        _run_blocking(run_cell(cell, line, headless=True))

    @line_magic("agent")  # type: ignore[arg-type]
    def agent_line(self, line: str) -> Any:
        from mibyan_jupyter.jupyter.commands import COMMANDS_HELP, run_command

        if wants_help(line) or not line.strip():
            print(COMMANDS_HELP)
            return None
        return run_command(line, self)


AgentMagics.agent_cell.__doc__ = USAGE  # type: ignore[assignment]  # what %%agent? shows


def _run_blocking(coro: Any) -> None:
    """Run the cell's coroutine to the end from sync code: on this thread when no loop
    runs here, else on a worker thread that keeps this context (output goes to the cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    context = contextvars.copy_context()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            context.run(asyncio.run, coro)
        except BaseException as error:
            failure.append(error)

    worker = threading.Thread(target=target, name="mibyan-agent-cell", daemon=True)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
