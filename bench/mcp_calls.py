"""What a no-op MCP tool call costs when the agent makes it, against the SDK's bare call.

The server is the tests' FastMCP demo (tests/mcp/servers/demo.py), over stdio (a process
the hub starts, under its watchdog) and over Streamable HTTP (a uvicorn process on
127.0.0.1, port 0). For each transport, in the same run and on the same server code:

- **agent**: an ``Agent`` whose scripted model calls ``<server>__noop`` once per turn
  (``CALLS`` turns, no approval gate), the tools from ``McpHub.tools``; each figure is the
  time from the call's ``ToolExecutionStart`` to its ``ToolExecutionEnd`` event;
- **bare**: ``ClientSession.call_tool("noop")`` of a session opened with the SDK alone,
  awaited on the caller's own loop.

The two are measured in alternating blocks of ``BLOCK`` calls (so drift in the machine's
load hits both), after a warm-up, and compared by their medians: ``agent_overhead_ms_*`` is
``median(agent) - median(bare)`` (goal <= 2 ms each). Then ``%load_ext mibyan_jupyter``
in fresh kernels (bench/load_ext.py's measure, best of 3) with no MCP configuration and with
an ``mcpServers`` file in ``<JUPYTER_CONFIG_DIR>/mibyan/mcp.json`` (the configuration helper
reads it; loading must not start or import anything of MCP). The last line is one JSON
object (with the machine's 1-minute load average: on shared cores the thread hand-over's
wake-ups, and so the overhead, grow with the load). ``MIBYAN_BENCH_MCP_CALLS`` scales the
calls (default 300 per side and transport).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mibyan_jupyter.core import Agent, BudgetLimits, Call, Reply, ScriptedModel
from mibyan_jupyter.core.events import ToolExecutionEnd, ToolExecutionStart
from mibyan_jupyter.mcp.hub import McpHub
from mibyan_jupyter.mcp.spec import ServerSpec

# Not named bench/mcp.py, as the issue first had it: every bench script has this folder
# first on sys.path, so a file mcp.py here hid the SDK from openai-agents' ``import mcp``
# in bench/store.py (its peer figures came out empty). bench/load_ext.py is loaded by path.
_HERE = Path(__file__).resolve().parent


def best(module: str) -> tuple[float, str]:
    """bench/load_ext.py's measure: best of 3 fresh kernels."""
    spec = importlib.util.spec_from_file_location("_bench_load_ext", _HERE / "load_ext.py")
    assert spec is not None
    assert spec.loader is not None
    load_ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load_ext)
    result: tuple[float, str] = load_ext.best(module)
    return result


DEMO = _HERE.parent / "tests" / "mcp" / "servers" / "demo.py"
CALLS = int(os.environ.get("MIBYAN_BENCH_MCP_CALLS", "300"))
BLOCK = 50
WARMUP = 20


async def agent_block(hub: McpHub, spec: ServerSpec, n: int) -> list[float]:
    """``n`` turns each calling the no-op tool; seconds from each call's start to its end."""
    tools = await hub.tools(spec)
    name = f"{spec.name}__noop"
    script = ScriptedModel(
        [Reply(calls=[Call(name, {})]) for _ in range(n)] + ["done"], record=False
    )
    agent = Agent(stream_fn=script, tools=tools, budget=BudgetLimits(max_turns=None))
    started: dict[str, float] = {}
    spans: list[float] = []

    def listen(event: object) -> None:
        if isinstance(event, ToolExecutionStart):
            started[event.call_id] = time.perf_counter()
        elif isinstance(event, ToolExecutionEnd):
            spans.append(time.perf_counter() - started.pop(event.call_id))
            assert not event.is_error, event.result

    agent.subscribe(listen)
    assert await agent.achat("go") == "done"
    return spans


async def bare_block(session: Any, n: int) -> list[float]:
    spans: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        result = await session.call_tool("noop", {})
        spans.append(time.perf_counter() - start)
        assert not result.isError
    return spans


@asynccontextmanager
async def bare_session(spec: ServerSpec) -> AsyncIterator[Any]:
    """A session opened with the SDK alone (no hub, no thread, no watchdog)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if spec.transport == "stdio":
        params = StdioServerParameters(command=spec.command or "", args=list(spec.args))
        errlog = open(os.devnull, "w")  # noqa: ASYNC230, SIM115 - once, before the timing
        try:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
        finally:
            errlog.close()
    else:
        async with (
            streamable_http_client(spec.url or "") as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def compare(hub: McpHub, spec: ServerSpec) -> dict[str, float]:
    """Median agent and bare call times (ms) and their difference, blocks alternating."""
    agent: list[float] = []
    bare: list[float] = []
    async with bare_session(spec) as session:
        await agent_block(hub, spec, WARMUP)
        await bare_block(session, WARMUP)
        for _ in range(max(1, CALLS // BLOCK)):
            agent += await agent_block(hub, spec, BLOCK)
            bare += await bare_block(session, BLOCK)
    agent_ms, bare_ms = statistics.median(agent) * 1e3, statistics.median(bare) * 1e3
    return {"agent_ms": agent_ms, "bare_ms": bare_ms, "overhead_ms": agent_ms - bare_ms}


def http_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(DEMO), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"the demo HTTP server did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


async def round_trips() -> dict[str, dict[str, float]]:
    stdio = ServerSpec(
        name="demo", transport="stdio", command=sys.executable, args=(str(DEMO), "stdio")
    )
    process, url = http_server()
    hub = McpHub()
    try:
        return {
            "stdio": await compare(hub, stdio),
            "http": await compare(hub, ServerSpec(name="web", transport="http", url=url)),
        }
    finally:
        await asyncio.to_thread(hub.stop_all)
        process.terminate()
        process.wait(5)
        if process.stdout is not None:
            process.stdout.close()


def load_ext_ms(with_mcp: bool) -> float:
    """Best-of-3 ``%load_ext`` in fresh kernels, with a config dir of its own."""
    with tempfile.TemporaryDirectory(prefix="mibyan-bench-config-") as config:
        if with_mcp:
            folder = Path(config) / "mibyan"
            folder.mkdir()
            servers = {
                "demo": {"command": sys.executable, "args": [str(DEMO), "stdio"]},
                "web": {"url": "http://127.0.0.1:9/mcp"},
            }
            (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        saved = os.environ.get("JUPYTER_CONFIG_DIR")
        os.environ["JUPYTER_CONFIG_DIR"] = config
        try:
            seconds, extra = best("mibyan_jupyter")
        finally:
            if saved is None:
                os.environ.pop("JUPYTER_CONFIG_DIR", None)
            else:
                os.environ["JUPYTER_CONFIG_DIR"] = saved
    print(
        f"%load_ext mibyan_jupyter ({'with' if with_mcp else 'no'} MCP config): "
        f"{seconds * 1000:.1f} ms ({extra})"
    )
    return seconds * 1000


def on_the_supported_sdk() -> None:
    """The package's ``mcp`` extra is the SDK's 1.x line; ``make bench``'s venv gets 2.x
    through openai-agents. There, run again with the test venv's Python (``.[mcp]``)."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    if version.startswith("1."):
        return
    python = _HERE.parent / ".venv" / "bin" / "python"
    if not python.exists() or Path(sys.executable) == python:
        sys.exit(f"bench/mcp_calls.py needs the mcp 1.x SDK (found {version}): install .[mcp]")
    print(f"mcp {version} here; running with {python} (the mcp extra, 1.x)", flush=True)
    os.execv(python, [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])


def main() -> None:
    on_the_supported_sdk()
    started = time.perf_counter()
    figures = asyncio.run(round_trips())
    for transport, figure in figures.items():
        print(
            f"{transport:>5}: agent {figure['agent_ms']:.3f} ms, bare call_tool "
            f"{figure['bare_ms']:.3f} ms, overhead {figure['overhead_ms']:.3f} ms "
            f"(median of {CALLS} each; goal <= 2 ms)"
        )
    plain, configured = load_ext_ms(False), load_ext_ms(True)
    print(f"in {time.perf_counter() - started:.1f} s")
    print(
        json.dumps(
            {
                "agent_overhead_ms_stdio": round(figures["stdio"]["overhead_ms"], 3),
                "agent_overhead_ms_http": round(figures["http"]["overhead_ms"], 3),
                "agent_ms_stdio": round(figures["stdio"]["agent_ms"], 3),
                "bare_ms_stdio": round(figures["stdio"]["bare_ms"], 3),
                "agent_ms_http": round(figures["http"]["agent_ms"], 3),
                "bare_ms_http": round(figures["http"]["bare_ms"], 3),
                "load_ext_ms": round(plain, 1),
                "load_ext_ms_with_mcp": round(configured, 1),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
