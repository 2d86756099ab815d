"""Let a Stop click reach the kernel while code blocks the kernel's main thread.

JupyterLab 4.6 sends a widget's comm messages over a kernel subshell (``CommsOverSubshells``,
per comm target by default), and ipykernel 7 serves each subshell on a thread of its own. But
ipykernel 7.4 routes a comm's incoming messages to the shell that last *sent* on that comm
(``Comm._reply_subshell_for``: so a cell awaiting a comm reply gets it on its own loop); the
view sends from the ``%%agent`` cell, on the main shell, so without this every click, Stop
included, waits on the main thread, which ``run_python`` blocks (measured in a real kernel:
a Stop sent over a subshell during ``time.sleep(8)`` was handled 8 s later, on MainThread).

So the view's comm keeps a Stop message on the subshell the front end sent it over; every
other message is routed as ipykernel decides. The Stop handler is thread-safe (the cell's
run marshals onto the loop and interrupts blocking code: ``kernel_tools/live.py``). Where
the hook is missing (another kernel, an older ipykernel, a front end without subshells),
nothing changes: Stop during blocking code takes effect when the code returns, and the
card says to use Kernel > Interrupt (docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_HOOK = "_reply_subshell_for"
"""ipykernel 7.4's per-comm routing hook, ``(data, default_subshell_id) -> subshell_id``."""


def is_stop(data: object) -> bool:
    """Whether a comm message's data is the view's ``{"type": "stop"}`` custom message."""
    if not isinstance(data, dict) or data.get("method") != "custom":
        return False
    content = data.get("content")
    return isinstance(content, dict) and content.get("type") == "stop"


def keep_stop_on_its_subshell(comm: Any) -> bool:
    """Route the view's Stop to the subshell it came over; ``True`` when the kernel has the
    hook (else nothing is changed)."""
    route: Callable[[object, str | None], str | None] | None = getattr(comm, _HOOK, None)
    if route is None or not callable(route):
        return False

    def routed(data: object, default: str | None) -> str | None:
        return default if is_stop(data) else route(data, default)

    setattr(comm, _HOOK, routed)
    return True
