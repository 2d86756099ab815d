"""Fixtures of the MCP runtime's tests: the demo server (tests/mcp/servers/demo.py, made with
the SDK's FastMCP) over stdio and over Streamable HTTP on 127.0.0.1, and a hub of the test's
own (its own runner thread, stopped afterwards)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mibyan_jupyter.mcp.hub import McpHub
from mibyan_jupyter.mcp.runner import Runner
from mibyan_jupyter.mcp.spec import ServerSpec

DEMO = Path(__file__).parent / "servers" / "demo.py"
TIMEOUT_S = 1.5
"""The specs' call timeout: short, so the hang test is quick."""


def stdio_spec(name: str = "demo", timeout: float = TIMEOUT_S) -> ServerSpec:
    return ServerSpec(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(DEMO), "stdio"),
        timeout=timeout,
    )


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every 20 ms; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """Whether no process has this pid (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class HttpServer:
    """The demo server over Streamable HTTP in a subprocess, on a port the OS picked."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(DEMO), "http"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "PORT n" once it listens
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"the demo HTTP server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def spec(self, name: str = "web", timeout: float = TIMEOUT_S) -> ServerSpec:
        return ServerSpec(name=name, transport="http", url=self.url, timeout=timeout)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(scope="session")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.close()


def _hub() -> Iterator[McpHub]:
    runner = Runner(name="mibyan-mcp-test")
    hub = McpHub(runner)
    try:
        yield hub
    finally:
        hub.stop_all()
        runner.close()


@pytest.fixture
def hub() -> Iterator[McpHub]:
    """A hub of the test's own (its own runner thread), stopped afterwards."""
    yield from _hub()


@pytest.fixture(scope="module")
def shared_hub() -> Iterator[McpHub]:
    """One hub for a module's tests, so a server starts once (~1.5 s each) instead of once
    per test; tests that need a fresh server give their spec a name of its own."""
    yield from _hub()


@pytest.fixture(params=["stdio", "http"])
def spec(request: pytest.FixtureRequest) -> ServerSpec:
    """The demo server's spec over each transport (the HTTP server is shared)."""
    if request.param == "stdio":
        return stdio_spec()
    server: HttpServer = request.getfixturevalue("http_server")
    return server.spec()
