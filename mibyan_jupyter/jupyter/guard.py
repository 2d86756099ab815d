"""Approvals the agent cannot grant itself: every path designed for configuration is closed
to code that runs inside an agent run (docs/architecture.md, "Approvals the agent cannot
grant itself").

An approved ``run_python`` runs in the user's namespace with the user's powers, so it can
call what a cell can: ``%agent policy set run_shell allow``, ``%config AgentMagics.approve
= 'auto'``, ``os.environ['MIBYAN_APPROVE'] = 'auto'``, the store's rules API. Each of those
asks :func:`inside_run` first, which tells the two callers apart:

* **While a run is in progress in this kernel** every caller is the run's: the user's
  cells wait behind the ``%%agent`` cell that awaits the run (the kernel runs one cell at a
  time), and clicks arrive as comm messages that never run a magic. So a configuration
  command during a run is refused whoever seems to call it.
* **Code the agent ran, later**: a function or a thread that tool code defined and left
  behind (a timer, a callback) still has frames compiled from the tool's code, whose file
  name is ``<agent-python-N>`` (jupyter/kernel_tools/execute.py). A caller with such a
  frame on its stack is refused at any time.

A user's own cell passes both: no run is in progress while it executes, and its frames are
the cell's. What this does not stop, honestly: code in the kernel can do anything the user
can (write the database with ``sqlite3``, read the rule key, patch this module); these
guards close the designed paths and make tampering with the saved rules visible in the
audit (store/approval_rules.py), they do not make it impossible.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

from traitlets import TraitError

from mibyan_jupyter.jupyter.defaults import APPROVE_ENV
from mibyan_jupyter.jupyter.state import kernel_state

TOOL_CODE_PREFIX = "<agent-python-"
"""The file name of code run_python executes (``FILENAME_PREFIX`` of
jupyter/kernel_tools/execute.py; kept here so ``%load_ext`` imports no tool module)."""

WHY = "settings and approvals change only from a cell you run or a click on the card"


class RefusedInsideRun(PermissionError):
    """A configuration change asked for by code inside an agent run: one line."""

    def _render_traceback_(self) -> list[str]:
        return [f"RefusedInsideRun: {self}"]


class SettingRefused(TraitError):
    """``%config AgentMagics.*`` from inside a run. A ``TraitError``, so traitlets rolls the
    value back, and ``%config`` prints this one line instead of setting it."""


def inside_run() -> str | None:
    """Why the code calling now belongs to an agent run (``None``: it is the user's)."""
    if kernel_state().active_runs():
        return "an agent run is in progress in this kernel"
    if tool_code_on_stack():
        return "the call comes from code an agent ran"
    return None


def tool_code_on_stack() -> bool:
    """Whether a frame of this thread's stack runs code compiled from a tool's code."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_filename.startswith(TOOL_CODE_PREFIX):
                return True
            frame = frame.f_back
        return False
    finally:
        del frame


def refuse_inside_run(what: str) -> None:
    """Raise :class:`RefusedInsideRun` naming ``what`` when the caller is inside a run."""
    reason = inside_run()
    if reason is not None:
        raise RefusedInsideRun(f"{what} refused: {reason}; {WHY}.")


def store_write_check() -> str | None:
    """The check the store runs before it saves or forgets an "always" rule: refused only
    for code the agent ran (its frames), since the card's "always" click is saved from
    inside the run, by the approval gate, and must go through."""
    if tool_code_on_stack():
        return f"the call comes from code an agent ran; {WHY}"
    return None


_refused: dict[str, Any] = {}
"""Setting -> the value refused for it. ``%config`` also merges what it was given into the
shell's own config, where a later ``%reload_ext`` would read it: :func:`install` drops it."""


def checked_setting(proposal: Any) -> Any:
    """The ``@validate`` hook of the magic's traitlets (jupyter/entry/magics.py): the new
    value, unless the change comes from inside a run."""
    name = str(getattr(proposal["trait"], "name", "setting"))
    reason = inside_run()
    if reason is not None:
        _refused[name] = proposal["value"]
        raise SettingRefused(f"%config AgentMagics.{name} refused: {reason}; {WHY}.")
    if name in _refused and _refused[name] != proposal["value"]:
        del _refused[name]  # the user set another value since
    return proposal["value"]


_told: set[str] = set()


def approve_env() -> str:
    """``MIBYAN_APPROVE`` as it was when the extension loaded. A different value set since
    (by code a run executed, say) is ignored, and said so once per value."""
    started = kernel_state().approve_env
    now = os.environ.get(APPROVE_ENV, "")
    if now != started and now not in _told:
        _told.add(now)
        print(
            f"mibyan: {APPROVE_ENV} is now {now!r} but was {started!r} when the extension "
            "loaded; the later value is ignored (set it before the kernel starts, or use "
            "--approve on the cell).",
            file=sys.stderr,
        )
    return started


def install(magics: Any) -> None:
    """At ``%load_ext``: a value refused earlier that the magic took from the shell's config
    goes back to its default (and leaves that config), and the store this kernel opens asks
    :func:`store_write_check` before it writes a rule (set on the state, so loading imports
    no store module)."""
    section = getattr(getattr(magics, "config", None), "AgentMagics", None)
    shell_config = getattr(getattr(magics, "shell", None), "config", None)
    for name, value in list(_refused.items()):
        if getattr(magics, name, None) == value:
            setattr(magics, name, magics.trait_defaults(name))
            for config in (section, getattr(shell_config, "AgentMagics", None)):
                if config is not None and config.get(name) == value:
                    del config[name]
    kernel_state().rule_write_check = store_write_check
