"""``%load_ext mibyan_jupyter``: register the magics, the input transformer, the hook that
tells a run which cell it is in, and the queue comm target for the front-end extension."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.jupyter.magic import AgentMagics
from mibyan_jupyter.jupyter.transform import agent_cell_transformer

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from mibyan_jupyter.jupyter.options import Defaults

_MAGICS: AgentMagics | None = None


def active_defaults() -> Defaults:
    """The loaded magics' settings, or the class defaults (real magic used without load)."""
    return _MAGICS if _MAGICS is not None else AgentMagics()


def _remember_cell(info: Any) -> None:
    from mibyan_jupyter.jupyter.state import kernel_state

    kernel_state().cell_id = getattr(info, "cell_id", None)


def load(shell: InteractiveShell) -> None:
    global _MAGICS
    if _MAGICS is not None and _MAGICS.shell is shell:
        return  # loaded already: %load_ext twice changes nothing
    _MAGICS = AgentMagics(shell=shell)
    shell.register_magics(_MAGICS)
    if agent_cell_transformer not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(agent_cell_transformer)
    shell.events.register("pre_run_cell", _remember_cell)
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        from mibyan_jupyter.jupyter.queue_comm import register

        register(kernel)
    from mibyan_jupyter.jupyter.state import kernel_state

    kernel_state().db_path = _MAGICS.db_path or None


def unload(shell: InteractiveShell) -> None:
    global _MAGICS
    if agent_cell_transformer in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(agent_cell_transformer)
    with contextlib.suppress(ValueError):
        shell.events.unregister("pre_run_cell", _remember_cell)
    from mibyan_jupyter.jupyter.state import reset_kernel_state

    reset_kernel_state()
    _MAGICS = None
