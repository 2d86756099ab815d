"""The kernel's MCP servers: started once, listed, called, restarted, stopped.

Why one hub per kernel (docs/architecture.md, "Tools from outside"): a server is a process
(stdio) or a session (Streamable HTTP) that costs a second or more to start, so it is
started on the first cell that needs it and kept for the kernel's life, shared by every
cell and session. Its sessions live on the hub's :class:`~.runner.Runner` (its own thread
and loop); the public methods hand work over to it, so they may be called from the
kernel's loop (``tools``, ``call``) or from plain code (``stop``, ``stop_all``, ``status``).

Failures never raise into the agent: a server that does not start, crashes mid-call, hangs
or passes ``spec.timeout`` gives an error :class:`ToolResult` naming the server and what
happened, in one line, and is started again on the next call (a hung stdio server is killed,
not waited for). ``tools/list_changed`` refreshes the server's cached list: the next
``tools()`` (the next cell) sees it, and within a run each call checks the current list, so a
tool the server withdrew gives an error result; a tool it added reaches the model with the
next cell (:meth:`McpHub.on_tools_changed` tells a caller that wants to add it sooner).

:func:`kernel_hub` is the kernel's hub; it registers :meth:`McpHub.stop_all` with ``atexit``
so a kernel that shuts down stops its servers (one that is SIGKILLed is covered by the
watchdog, :mod:`.guard`). Importing this module imports no SDK: a server's start does.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mibyan_jupyter.core.tools import Tool, ToolResult

from .connection import Connection, ServerError, State
from .runner import Runner
from .spec import ServerSpec, Transport
from .tools import error_result, server_tools, to_result

STOP_TIMEOUT_S = 8.0
"""How long ``stop``/``stop_all`` wait in all (each server closes within ~3 s, in parallel)."""


@dataclass(frozen=True)
class ServerStatus:
    """One server as ``%agent mcp list`` shows it."""

    name: str
    state: State
    transport: Transport
    pid: int | None
    """The server's process (stdio, while it runs), else ``None``."""
    tools: int
    """How many tools it listed last (0 before it started)."""
    error: str | None
    """The last failure, one line (``None``: none since it last started)."""


class McpHub:
    """The servers of one kernel (see the module's text)."""

    def __init__(self, runner: Runner | None = None) -> None:
        self._runner = runner or Runner()
        self._connections: dict[str, Connection] = {}
        self._ended: dict[str, ServerStatus] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._listeners: list[Callable[[str], None]] = []
        self._workdir: Path | None = None
        self._lock = threading.Lock()

    async def tools(self, spec: ServerSpec) -> list[Tool]:
        """The server's tools as core tools (starts it if needed). Raises
        :class:`ServerError` (one line) when it cannot be started."""
        return await self._runner.run(self._tools(spec))

    async def call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's tool ``tool`` (its own name); never raises for a server's
        failure (an error result instead). Cancelling the caller cancels the call."""
        return await self._runner.run(self._call(spec, tool, arguments))

    def stop(self, name: str) -> None:
        """Stop one server (blocks until it is gone, a few seconds at most)."""
        if self._runner.started:
            self._runner.run_sync(self._stop([name]), STOP_TIMEOUT_S)

    def stop_all(self) -> None:
        """Stop every server and remove the hub's scratch folder (also at kernel exit)."""
        if self._runner.started:
            with contextlib.suppress(TimeoutError):
                self._runner.run_sync(self._stop(list(self._connections)), STOP_TIMEOUT_S)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def status(self) -> list[ServerStatus]:
        """Every server started since the kernel began, by name."""
        current = {name: _status(conn) for name, conn in list(self._connections.items())}
        return sorted({**self._ended, **current}.values(), key=lambda s: s.name)

    def on_tools_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(server name)`` after a server's tool list was refreshed (on the
        hub's thread). Returns the function that unsubscribes."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    # -- on the runner's loop -----------------------------------------------------------

    async def _tools(self, spec: ServerSpec) -> list[Tool]:
        connection = await self._connected(spec)
        await connection.settled()
        return server_tools(spec.name, connection.listed, self._caller(spec))

    def _caller(self, spec: ServerSpec) -> Callable[[str, dict[str, Any]], Any]:
        async def call(tool: str, arguments: dict[str, Any]) -> ToolResult:
            return await self.call(spec, tool, arguments)

        return call

    async def _call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any]) -> ToolResult:
        try:
            connection = await self._connected(spec)
        except ServerError as error:
            return error_result(spec.name, tool, f"{error}; it is tried again on the next call")
        await connection.settled()
        if not connection.offers(tool):
            return error_result(
                spec.name, tool, f"MCP server {spec.name!r} no longer offers the tool {tool!r}"
            )
        try:
            result = await connection.call(tool, arguments)
        except ServerError as error:
            self._drop(connection, kill=True)
            return error_result(spec.name, tool, f"{error}; it is restarted on the next call")
        return to_result(spec.name, tool, result)

    async def _connected(self, spec: ServerSpec) -> Connection:
        connection = self._connections.get(spec.name)
        if connection is not None and (
            connection.spec != spec or (connection.state != "starting" and not connection.alive())
        ):
            self._drop(connection, kill=connection.state == "crashed")
            connection = None
        if connection is None:
            connection = Connection(spec, self._dir(), lambda: self._changed(spec.name))
            self._connections[spec.name] = connection
            self._ended.pop(spec.name, None)
        try:
            await connection.started()
        except ServerError:
            self._drop(connection, kill=True)
            raise
        return connection

    def _drop(self, connection: Connection, *, kill: bool) -> None:
        """Forget the connection now (the next call starts a new one) and close it in the
        background, so the failing call's result is not held up by the close."""
        name = connection.spec.name
        if self._connections.get(name) is connection:
            del self._connections[name]
        if connection.state == "running" and not connection.alive(thorough=True):
            connection.state, connection.error = "crashed", connection.describe(EOFError())
        self._ended[name] = _status(connection, ended=True)
        task = asyncio.get_running_loop().create_task(connection.close(kill=kill))
        self._closing.add(task)
        task.add_done_callback(lambda done: self._closed(connection, done))

    def _closed(self, connection: Connection, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        name = connection.spec.name
        if name not in self._connections:
            self._ended[name] = _status(connection, ended=True)

    async def _stop(self, names: list[str]) -> None:
        for name in names:
            if (connection := self._connections.get(name)) is not None:
                self._drop(connection, kill=False)
        if self._closing:
            await asyncio.wait(set(self._closing))

    def _changed(self, name: str) -> None:
        for callback in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener never breaks the hub
                callback(name)

    def _dir(self) -> Path:
        with self._lock:
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="mibyan-mcp-"))
            return self._workdir


def _status(connection: Connection, *, ended: bool = False) -> ServerStatus:
    state: State = connection.state
    if ended and state in ("running", "starting"):
        state = "stopped"
    elif state == "running" and not connection.alive(thorough=True):
        state = "crashed"
    running = state == "running"
    return ServerStatus(
        name=connection.spec.name,
        state=state,
        transport=connection.spec.transport,
        pid=connection.pid if running and connection.spec.transport == "stdio" else None,
        tools=len(connection.listed),
        error=connection.error,
    )


_HUB: McpHub | None = None
_HUB_LOCK = threading.Lock()


def kernel_hub() -> McpHub:
    """The kernel's one hub (made on first use; its servers stop when the process exits)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None:
            _HUB = McpHub()
            atexit.register(_HUB.stop_all)
        return _HUB
