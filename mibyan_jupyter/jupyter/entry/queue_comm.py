"""The kernel's end of the front-end extension's queue: a ``%%agent`` cell run while the
agent of its session is working reaches the agent at once as a steering message (or a
follow-up with ``--after``), instead of waiting behind the running cell.

Why a comm: the kernel runs one cell at a time, so the second cell's own execution only
starts when the first ends; but ipykernel >= 7.4 dispatches comm messages while an async
cell runs. The JupyterLab extension (labextension/) opens a comm on :data:`TARGET` with the
cell's source; the reply says whether it was queued. When the queued cell finally executes,
:func:`~mibyan_jupyter.jupyter.cell.run.run_cell` sees it was delivered and does not run it twice.
"""

from __future__ import annotations

from typing import Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError, parse_cell_line
from mibyan_jupyter.jupyter.cell.queued import QueueMode, give_to_running
from mibyan_jupyter.jupyter.entry.transform import split_agent_cell
from mibyan_jupyter.jupyter.state import ActiveRun, Delivered, KernelState, kernel_state

TARGET = "mibyan_jupyter.queue"


def handle_queue_request(data: dict[str, Any], state: KernelState | None = None) -> dict[str, Any]:
    """Queue the cell's prompt if an agent of its session is running; the reply for the
    front end. Never raises: a bad message is answered ``queued: false`` with a reason."""
    state = state or kernel_state()
    parts = split_agent_cell(str(data.get("source", "")))
    if parts is None:
        return {"queued": False, "reason": "not a %%agent cell"}
    line, prompt = parts
    try:
        options = parse_cell_line(line, state.defaults)
    except AgentUsageError as error:
        return {"queued": False, "reason": str(error)}
    if options.session == "new" or not prompt.strip():
        return {"queued": False, "reason": "the cell starts a new session or has no prompt"}
    notebook = data.get("notebook_path") or None
    target = None if options.session in (None, "last") else options.session
    run = state.find_run(notebook, target)
    if run is None:
        return {"queued": False, "reason": "no agent of this session is running"}
    mode: QueueMode = "follow_up" if options.after else "steer"
    key = str(data.get("cell_id") or "") or prompt
    state.remember_delivered(key, Delivered(run.session_id, mode, prompt))
    run.task.get_loop().call_soon_threadsafe(_deliver, state, run, prompt, mode)
    return {"queued": True, "mode": mode, "session": run.session_id}


def _deliver(state: KernelState, run: ActiveRun, prompt: str, mode: QueueMode) -> None:
    """On the run's loop: the session may be gone by now (deleted), then nothing happens."""
    handle = state.session(run.session_id)
    if handle is not None:
        give_to_running(handle.agent, run.view, prompt, mode)


def register(kernel: Any) -> bool:
    """Register the comm target with the kernel's comm manager (``False`` without one)."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        try:
            from comm import get_comm_manager

            manager = get_comm_manager()
        except Exception:
            return False
    manager.register_target(TARGET, _on_open)
    return True


def _on_open(comm: Any, open_msg: dict[str, Any]) -> None:
    data = open_msg.get("content", {}).get("data", {}) or {}
    try:
        reply = handle_queue_request(data if isinstance(data, dict) else {})
    except Exception as error:  # never break the front end
        reply = {"queued": False, "reason": f"{type(error).__name__}: {error}"}
    comm.send(reply)
    comm.close()
