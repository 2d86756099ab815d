"""What this kernel can do while a ``%%agent`` cell awaits its run, decided once at
``%load_ext``.

Why it matters: the cell awaits its run so that Approve, Deny and Stop clicks (comm
messages) reach it meanwhile. ipykernel >= 7.4 dispatches comm messages while an async
cell runs; older kernels (ipykernel 6.x, 7.0-7.3, Colab's runtime) queue them until the
cell ends (docs/architecture.md, "Running inside the kernel"). There the run still
streams (the kernel's messages to the page flow as usual), but no click, no Stop and no
queued cell can reach it, so waiting for a click would only wait out ``headless_wait``
and then let the policy decide anyway. The cell pipeline reads the answer from the kernel
state (:attr:`~mibyan_jupyter.jupyter.state.KernelState.kernel_limits`): the policy
decides at once, and the cell says once what is unavailable.

Decided from the kernel object and the ipykernel version already imported, not by a
probe: a probe would need an awaited cell, and ``%load_ext`` must stay light (no import).
"""

from __future__ import annotations

import re
import sys
from typing import Any

FULL_MODE = (7, 4)
"""The first ipykernel that dispatches comm messages while an async cell runs."""


def kernel_limits(shell: Any) -> str | None:
    """Which kernel cannot deliver clicks during a run, as the notice names it (e.g.
    ``"ipykernel 6.31.0"``); ``None``: the full mode, or no kernel at all (plain IPython,
    where the view's handshake finds there is no front end)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    if type(kernel).__module__.startswith("google.colab"):
        return "Colab's kernel"
    version = ipykernel_version()
    if version is None or version >= FULL_MODE:
        return None  # unknown: the view's handshake still decides, as in the full mode
    module = sys.modules.get("ipykernel")
    return f"ipykernel {getattr(module, '__version__', '.'.join(map(str, version)))}"


def ipykernel_version() -> tuple[int, int] | None:
    """``(major, minor)`` of the ipykernel this process imported (``None``: not imported)."""
    module = sys.modules.get("ipykernel")
    if module is None:
        return None
    match = re.match(r"(\d+)\.(\d+)", str(getattr(module, "__version__", "")))
    return (int(match[1]), int(match[2])) if match else None
