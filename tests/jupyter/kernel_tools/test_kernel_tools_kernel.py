"""run_python inside a real ipykernel, awaited by an async cell as the ``%%agent`` cell does:
Kernel > Interrupt stops code that never yields (ipykernel only schedules a cancellation
for async cells), output stays in the tool result instead of leaking into the cell, and the
inline backend does not show the agent's figure a second time. One kernel, ~2-4 s."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

pytestmark = pytest.mark.kernel

SETUP = """
from pathlib import Path
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
interrupts = []
(tool,) = kernel_tools(["python"], namespace=get_ipython().user_ns, root=Path("."),
                       shell=get_ipython(), on_interrupt=lambda: interrupts.append(1))
async def go(code):
    return await tool.execute("c", tool.validate({"code": code}), AbortSignal(), print)
"""


@pytest.fixture(scope="module")
def kernel(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    home = tmp_path_factory.mktemp("kernel-home")
    env = {**os.environ, "IPYTHONDIR": str(home)}
    env.pop("MPLBACKEND", None)
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(home))
    try:
        reply = client.execute_interactive(SETUP, timeout=60, output_hook=lambda _: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def cell_output(client: BlockingKernelClient, msg_id: str) -> list[dict[str, Any]]:
    """The iopub outputs of one execution, until the kernel is idle again."""
    outputs = []
    while True:
        message = client.get_iopub_msg(timeout=30)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind = message["msg_type"]
        if kind in ("stream", "display_data", "execute_result", "error"):
            outputs.append({"type": kind, **message["content"]})
        if kind == "status" and message["content"]["execution_state"] == "idle":
            return outputs


def test_interrupt_stops_code_that_never_yields(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    manager, client = kernel
    msg_id = client.execute(
        "r = await go('print(\"spinning\")\\nwhile True: pass')\n"
        "import asyncio; await asyncio.sleep(0)  # on_interrupt: the loop's next turn\n"
        "print(r.is_error, r.content.splitlines()[0], interrupts)"
    )
    time.sleep(0.8)  # let the code start spinning
    started = time.monotonic()
    manager.interrupt_kernel()  # Kernel > Interrupt
    outputs = cell_output(client, msg_id)
    assert time.monotonic() - started < 5
    assert outputs == [
        {
            "type": "stream",
            "name": "stdout",
            "text": "True Interrupted by the user (Kernel > Interrupt): the tool was stopped "
            "before it finished. [1]\n",
        }
    ]


def test_figures_and_displays_stay_in_the_result(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, client = kernel
    msg_id = client.execute(
        "%matplotlib inline\n"
        "r = await go('import matplotlib.pyplot as plt\\nplt.plot([1, 2])\\n"
        'from IPython.display import display, HTML\\ndisplay(HTML("<b>x</b>"))\\nprint(7)\')\n'
        "print([o['output_type'] for o in r.details['outputs']])"
    )
    outputs = cell_output(client, msg_id)
    assert outputs == [  # nothing else: no figure shown again by the inline backend
        {
            "type": "stream",
            "name": "stdout",
            "text": "['display_data', 'stream', 'display_data']\n",
        }
    ]
