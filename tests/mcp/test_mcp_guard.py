"""No MCP server outlives its kernel: ``stop_all`` ends every server process, a process
holding a hub that is SIGKILLed leaves none behind (the watchdog, mibyan_jupyter/mcp/guard.py),
and a real kernel that shuts down stops its servers (``kernel_hub`` registers ``stop_all``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import DEMO, gone, stdio_spec, wait_until
from jupyter_client.manager import start_new_kernel

from mibyan_jupyter.mcp.hub import McpHub

pytestmark = pytest.mark.slow


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_stop_all_leaves_no_process(hub: McpHub) -> None:
    spec = stdio_spec()
    server = int(str((await hub.call(spec, "pid", {})).content))
    (status,) = hub.status()
    assert status.pid == server
    watchdog = parent_of(server)
    assert parent_of(watchdog) == os.getpid()  # the kernel -> watchdog -> server
    hub.stop_all()
    wait_until(lambda: gone(server) and gone(watchdog), 5, "the server and its watchdog to exit")
    assert hub.status()[0].state == "stopped"


HOLDER = """
import asyncio, sys, time
sys.path.insert(0, {tests!r})
from conftest import stdio_spec
from mibyan_jupyter.mcp.hub import McpHub

async def main():
    hub = McpHub()
    spec = stdio_spec(timeout=600)
    result = await hub.call(spec, "pid", {{}})
    # Blocked in a call, the server would never notice its stdin closing: only the
    # watchdog can end it.
    hanging = asyncio.ensure_future(hub.call(spec, "hang", {{"seconds": 600}}))
    await asyncio.sleep(0.5)
    print("SERVER", result.content, flush=True)
    await hanging

asyncio.run(main())
"""


def test_a_sigkilled_kernel_leaves_no_orphan_server() -> None:
    code = HOLDER.format(tests=str(Path(__file__).parent))
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.startswith("SERVER "), line
        server = int(line.split()[1])
        watchdog = parent_of(server)
        assert parent_of(watchdog) == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait(5)
        wait_until(lambda: gone(server) and gone(watchdog), 5, "the orphaned server to die")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


KERNEL_CODE = """
from mibyan_jupyter.mcp.hub import kernel_hub
from mibyan_jupyter.mcp.spec import ServerSpec
spec = ServerSpec(name="demo", transport="stdio", command={python!r},
                  args=({demo!r}, "stdio"), env={{"DEMO_EXIT_FILE": {exit_file!r}}})
result = await kernel_hub().call(spec, "pid", {{}})
print("SERVER", result.content)
"""


@pytest.mark.kernel
def test_a_kernel_that_shuts_down_stops_its_servers(tmp_path: Path) -> None:
    """The hub's ``stop_all`` runs at the kernel's exit: the server is stopped in order
    (its stdin closed, so it writes its exit file), not left to the watchdog's SIGTERM."""
    exit_file = tmp_path / "server-exited"
    code = KERNEL_CODE.format(python=sys.executable, demo=str(DEMO), exit_file=str(exit_file))
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        output: list[str] = []
        reply = client.execute_interactive(
            textwrap.dedent(code),
            timeout=30,
            output_hook=lambda m: output.append(m["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        line = next(x for x in "".join(output).splitlines() if x.startswith("SERVER "))
        server = int(line.split()[1])
        watchdog = parent_of(server)
        assert parent_of(watchdog) == manager.provisioner.process.pid  # type: ignore[union-attr]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)  # a shutdown_request, as Lab's "Shut Down Kernel"
    wait_until(lambda: gone(server) and gone(watchdog), 5, "the kernel's server to stop")
    assert exit_file.read_text() == "stdin closed\n"
