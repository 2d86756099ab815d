"""``%load_ext mibyan_jupyter``: register the magics, the input transformer, the hook that
tells a run which cell it is in, and the queue comm target for the front-end extension.

The loaded magic becomes the kernel state's defaults (:meth:`KernelState.configure`): its
traitlets are read live, so ``%config AgentMagics.*`` reaches the next cell, and nothing
below has to reach back up here for them (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.jupyter.entry.capabilities import kernel_limits
from mibyan_jupyter.jupyter.entry.magics import AgentMagics
from mibyan_jupyter.jupyter.entry.transform import agent_cell_transformer
from mibyan_jupyter.jupyter.guard import install as install_guard
from mibyan_jupyter.jupyter.guard import refuse_inside_run
from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell


def _remember_cell(info: Any) -> None:
    kernel_state().enter_cell(getattr(info, "cell_id", None))


def loaded_magics(shell: InteractiveShell) -> AgentMagics | None:
    """The magics ``%load_ext`` registered on ``shell`` (``None``: not loaded there)."""
    magics = kernel_state().defaults
    if isinstance(magics, AgentMagics) and magics.shell is shell:
        return magics
    return None


def load(shell: InteractiveShell) -> None:
    if loaded_magics(shell) is not None:
        return  # loaded already: %load_ext twice changes nothing
    magics = AgentMagics(shell=shell)
    shell.register_magics(magics)
    if agent_cell_transformer not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(agent_cell_transformer)
    shell.events.register("pre_run_cell", _remember_cell)
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        from mibyan_jupyter.jupyter.entry.queue_comm import register
        from mibyan_jupyter.jupyter.kernel_tools import notebook_comm

        register(kernel)
        notebook_comm.register(kernel)  # the notebook tools' front end (--tools notebook)
    kernel_state().configure(magics)
    kernel_state().kernel_limits = kernel_limits(shell)  # clicks during a run? (capabilities.py)
    install_guard(magics)  # code inside a run cannot write approval rules (jupyter/guard.py)


def unload(shell: InteractiveShell) -> None:
    refuse_inside_run("%unload_ext mibyan_jupyter")  # a reload would re-read MIBYAN_APPROVE
    if agent_cell_transformer in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(agent_cell_transformer)
    with contextlib.suppress(ValueError):
        shell.events.unregister("pre_run_cell", _remember_cell)
    reset_kernel_state()  # back to the built-in defaults
