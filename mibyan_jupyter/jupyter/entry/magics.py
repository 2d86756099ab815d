"""``%%agent`` and ``%agent``: the magics, with their defaults as configurable traitlets.

Put defaults in an IPython profile (``c.AgentMagics.model = "anthropic:claude-sonnet-4-5"``)
or set them at run time (``%config AgentMagics.max_turns = 20``). This module imports only
IPython and traitlets: the agent, the providers and the store load on the first cell, so
``%load_ext mibyan_jupyter`` stays fast.

In a notebook, a ``%%agent`` cell never reaches :meth:`AgentMagics.agent_cell`: the input
transformer rewrites it into an ``await`` (see :mod:`.transform`) so clicks can reach the
run. The real cell magic is still there for ``run_cell_magic`` and shells without the
transformer; it cannot receive clicks while it blocks, so the policy decides approvals.
The loaded magic is the kernel state's defaults (see :mod:`.extension`): the cell pipeline
and the commands read the settings there, never from this class.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import threading
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, Enum, Float, Int, List, TraitError, Unicode, validate

from mibyan_jupyter.jupyter.cell.limits import LIMITS, LimitError, setting_value
from mibyan_jupyter.jupyter.cell.options import USAGE, AgentUsageError, wants_help
from mibyan_jupyter.jupyter.commands.reference import COMMANDS_HELP
from mibyan_jupyter.jupyter.defaults import (
    APPROVE_MODES,
    BUILTIN,
    COMPACT_MODES,
    HELP,
    SETTING_NAMES,
    THINKING_LEVELS,
    TOOL_MODES,
)
from mibyan_jupyter.jupyter.guard import checked_setting


@magics_class
class AgentMagics(Magics):
    """The agent's magics; the traits are the defaults of every ``%%agent`` cell (their
    values and help texts are defined once, in :mod:`mibyan_jupyter.jupyter.defaults`)."""

    model = Unicode(BUILTIN.model, help=HELP["model"]).tag(config=True)
    fallback_models = List(
        Unicode(), default_value=list(BUILTIN.fallback_models), help=HELP["fallback_models"]
    ).tag(config=True)
    system_prompt = Unicode(BUILTIN.system_prompt, help=HELP["system_prompt"]).tag(config=True)
    tools = Unicode(BUILTIN.tools, help=HELP["tools"]).tag(config=True)
    approve = Enum(list(APPROVE_MODES), BUILTIN.approve, help=HELP["approve"]).tag(config=True)
    max_turns = Int(BUILTIN.max_turns, help=HELP["max_turns"]).tag(config=True)
    max_tokens = Int(BUILTIN.max_tokens, help=HELP["max_tokens"]).tag(config=True)
    max_cost = Float(BUILTIN.max_cost, help=HELP["max_cost"]).tag(config=True)
    thinking = Enum(list(THINKING_LEVELS), BUILTIN.thinking, help=HELP["thinking"]).tag(config=True)
    tool_mode = Enum(list(TOOL_MODES), BUILTIN.tool_mode, help=HELP["tool_mode"]).tag(config=True)
    headless_wait = Float(BUILTIN.headless_wait, help=HELP["headless_wait"]).tag(config=True)
    db_path = Unicode(BUILTIN.db_path, help=HELP["db_path"]).tag(config=True)
    db_url = Unicode(BUILTIN.db_url, help=HELP["db_url"]).tag(config=True)
    compact = Enum(list(COMPACT_MODES), BUILTIN.compact, help=HELP["compact"]).tag(config=True)
    context_window = Int(BUILTIN.context_window, help=HELP["context_window"]).tag(config=True)
    variables = Bool(BUILTIN.variables, help=HELP["variables"]).tag(config=True)
    delegate_turns = Int(BUILTIN.delegate_turns, help=HELP["delegate_turns"]).tag(config=True)
    mcp_trust_folders = List(
        Unicode(), default_value=list(BUILTIN.mcp_trust_folders), help=HELP["mcp_trust_folders"]
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        self._loading_profile = True  # the profile's values arrive now: see _check_limit
        super().__init__(shell=shell, **kwargs)
        self._loading_profile = False
        # Read once, as the extension loads, like MIBYAN_APPROVE (mcp/trust.py, jupyter/guard.py).
        self.mcp_trust_env = os.environ.get("MIBYAN_MCP_TRUST", "")

    @validate(*LIMITS)
    def _check_limit(self, proposal: Any) -> Any:
        """``%config AgentMagics.max_cost = float('nan')`` is refused like ``--max-cost nan``
        (the limits are :data:`~mibyan_jupyter.jupyter.cell.limits.LIMITS`). A bad value in
        the IPython profile warns and keeps the built-in default, so ``%load_ext`` still
        loads the magics instead of failing on one setting."""
        checked_setting(proposal)  # never from inside an agent run (jupyter/guard.py)
        try:
            return setting_value(proposal["trait"].name, proposal["value"])
        except LimitError as error:
            if getattr(self, "_loading_profile", False):
                default = proposal["trait"].default_value
                print(f"mibyan: {error}; using {default!r}", file=sys.stderr)
                return default
            raise SettingError(str(error)) from None

    @validate(*(name for name in SETTING_NAMES if name not in LIMITS))
    def _refuse_inside_run(self, proposal: Any) -> Any:
        """Code inside an agent run cannot change the defaults (jupyter/guard.py); a
        ``db_url`` holding a password is refused when it is set, before anything keeps it
        (docs/architecture.md, "The team store (PostgreSQL)")."""
        value = checked_setting(proposal)
        if proposal["trait"].name == "db_url" and value:
            from mibyan_jupyter.store.files import StoreError

            try:
                from mibyan_jupyter.store.pg.connect import parse_url
            except ImportError:  # psycopg is an extra: the store says so when it opens
                return value
            try:
                parse_url(value)
            except StoreError as error:
                raise SettingError(str(error)) from None
        return value

    @cell_magic("agent")  # type: ignore[arg-type]
    def agent_cell(self, line: str, cell: str) -> None:
        if wants_help(line):
            print(USAGE)
            return
        from mibyan_jupyter.jupyter.cell.run import run_cell

        _run_blocking(run_cell(cell, line, headless=True))

    @line_magic("agent")  # type: ignore[arg-type]
    def agent_line(self, line: str) -> Any:
        from mibyan_jupyter.jupyter.commands.dispatch import run_command

        return run_command(line)


class SettingError(TraitError, AgentUsageError):
    """A refused ``c.AgentMagics`` value: a ``TraitError`` to traitlets (so ``%config`` and
    profile loading report it as a bad value and keep the old one), one line to the user."""


# What %%agent? and %agent? show: generated from the same tables as --help and %agent help.
AgentMagics.agent_cell.__doc__ = USAGE + "\nThe %agent commands: %agent help (or %agent?)."  # type: ignore[assignment]
AgentMagics.agent_line.__doc__ = COMMANDS_HELP  # type: ignore[assignment]


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
