"""One MCP server's session, held by one long-lived task on the runner's loop.

Why one task (docs/architecture.md, "Tools from outside"): the SDK's transports and
``ClientSession`` are anyio task groups that must be exited in the task that entered them.
:meth:`Connection._hold` enters them, initializes, lists the tools and then only waits to be
told to close; calls are made from other tasks on the same loop (the session allows that),
so a call that is cancelled or times out never tears down a context it did not open.

A connection is used once: after a crash, a hang or a timeout the hub drops it and starts a
new one on the next call. A hung stdio server is killed at once (its watchdog's process
group, :mod:`.guard`): asking it to exit would cost the SDK's 2 s grace for nothing.
Everything here runs on the runner's loop; the hub is the only caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from mibyan_jupyter.secrets import REDACT

from . import guard
from .http_watch import watched_client
from .spec import ServerSpec

State = Literal["starting", "running", "stopped", "crashed"]
CLOSE_GRACE_S = 3.0
START_TIMEOUT_S = 30.0
"""The least time a server gets to start and list its tools (a process that imports its SDK
takes a second or more on a loaded machine; ``spec.timeout`` is meant for calls)."""
_numbers = itertools.count(1)


class ServerError(Exception):
    """The server failed (start, crash, hang, timeout); the message is one line."""


class Connection:
    """A started (or starting) server: its session, listed tools, pids and last error."""

    def __init__(self, spec: ServerSpec, workdir: Path, on_list_changed: Callable[[], None]):
        self.spec = spec
        self.state: State = "starting"
        self.error: str | None = None
        self.listed: list[Any] = []
        self._names: frozenset[str] = frozenset()
        self._pids: tuple[int, int] | None = None
        self.session: Any = None
        number = next(_numbers)
        self.pidfile = workdir / f"{number}.pid"
        self.stderr_path = workdir / f"{number}.stderr"
        self._on_list_changed = on_list_changed
        self._closing = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refresh: asyncio.Task[None] | None = None
        self._broken: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._ready.add_done_callback(_retrieved)
        self._task = asyncio.get_running_loop().create_task(self._hold(), name=f"mcp {spec.name}")

    @property
    def pid(self) -> int | None:
        """The server's pid (stdio; the process the watchdog started), read once."""
        if self._pids is None and self.spec.transport == "stdio":
            self._pids = guard.read_pids(self.pidfile)
        return None if self._pids is None else self._pids[1]

    def alive(self, *, thorough: bool = False) -> bool:
        """Running, and (stdio) its process still exists. The quick check (every call) is
        one ``kill(pid, 0)``; ``thorough`` also tells a zombie from a process."""
        if self.state != "running" or self._broken.done():
            return False
        pid = self.pid
        if self.spec.transport != "stdio" or pid is None:
            return True
        return guard.alive(pid) if thorough else guard.exists(pid)

    def offers(self, tool: str) -> bool:
        """Whether the server's current list has ``tool``."""
        return tool in self._names

    async def started(self) -> None:
        """Wait until the session is initialized and its tools listed; raise
        :class:`ServerError` when it fails or takes longer than :func:`start_timeout`."""
        limit = start_timeout(self.spec)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), limit)
        except TimeoutError:
            self.state, self.error = "crashed", self.describe(TimeoutError(), limit=limit)
            raise ServerError(self.error) from None

    async def _hold(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open(stack)
                session = await stack.enter_async_context(self._session(read, write))
                await session.initialize()
                self._set_listed(await _list_all(session))
                self.session, self.state = session, "running"
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as error:  # every failure: one line for the user
            if self.state != "stopped":
                self.state, self.error = "crashed", self.describe(error)
            if not self._ready.done():
                self._ready.set_exception(ServerError(self.error or "stopped"))
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            if self.state == "running":
                self.state = "stopped"

    async def _open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command, args = guard.guarded(spec.command or "", spec.args, self.pidfile)
            params = StdioServerParameters(
                command=command,
                args=args,
                env=_secret_aware(spec.env, spec.resolved_env()),
                cwd=spec.cwd,
            )
            errlog = stack.enter_context(self.stderr_path.open("w", encoding="utf-8"))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            return read, write
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        headers = _secret_aware(spec.headers, spec.resolved_headers())
        timeout = httpx.Timeout(30.0, read=max(300.0, spec.timeout + 5))
        client = await stack.enter_async_context(watched_client(headers, timeout, self._break))
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(spec.url or "", http_client=client)
        )
        return read, write

    def _session(self, read: Any, write: Any) -> Any:
        from mcp import ClientSession

        return ClientSession(read, write, message_handler=self._on_message)

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: ``tools/list_changed`` starts a refresh (a task:
        awaiting ``list_tools`` here would wait for the loop that is calling us)."""
        root = getattr(message, "root", None)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self._refresh = asyncio.get_running_loop().create_task(self._relist())

    async def _relist(self) -> None:
        if self.session is None:
            return
        with contextlib.suppress(Exception):
            self._set_listed(await _list_all(self.session))
            self._on_list_changed()

    def _set_listed(self, listed: list[Any]) -> None:
        self.listed, self._names = listed, frozenset(item.name for item in listed)

    async def settled(self) -> None:
        """Wait for a refresh the server asked for (``tools/list_changed``), if one runs."""
        if self._refresh is not None and not self._refresh.done():
            await asyncio.shield(self._refresh)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """``tools/call``; raises :class:`ServerError` (one line) when the server fails.
        Over HTTP the call also ends when the transport reports a broken connection
        (:mod:`.http_watch`): the SDK would wait for the timeout."""
        request = self.session.call_tool(
            tool, arguments, read_timeout_seconds=timedelta(seconds=self.spec.timeout)
        )
        try:
            if self.spec.transport == "stdio":
                return await request
            return await self._unless_broken(asyncio.ensure_future(request), tool)
        except (asyncio.CancelledError, ServerError):
            raise
        except Exception as error:
            self.state, self.error = "crashed", self.describe(error, during=tool)
            raise ServerError(self.error) from None

    async def _unless_broken(self, request: asyncio.Future[Any], tool: str) -> Any:
        try:
            await asyncio.wait((request, self._broken), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            request.cancel()
            raise
        if request.done():
            return request.result()
        request.cancel()
        broken = ConnectionError(f"connection closed: {self._broken.result()}")
        self.state, self.error = "crashed", self.describe(broken, during=tool)
        raise ServerError(self.error)

    def _break(self, reason: str) -> None:
        """The HTTP transport failed (on the runner's loop): calls in flight end now."""
        if not self._broken.done():
            self._broken.set_result(reason)

    def describe(
        self, error: BaseException, during: str | None = None, limit: float | None = None
    ) -> str:
        """One line naming the server and what happened, with its last stderr line."""
        where = f"during the call of {during!r}" if during else "while starting"
        text = _leaf(error)
        if "timed out" in text.lower():
            what = f"did not answer within {limit or self.spec.timeout:g} s {where}"
        elif "connection closed" in text.lower():
            what = f"closed the connection {where} (it exited or crashed)"
        else:
            what = f"failed {where}: {text}"
        last = self.last_stderr_line()
        said = f"; its last output line: {last}" if last else ""
        return REDACT(f"MCP server {self.spec.name!r} {what}{said}")

    def last_stderr_line(self) -> str:
        try:
            lines = self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        return last if len(last) <= 200 else last[:199] + "…"

    async def close(self, *, kill: bool = False) -> None:
        """End the session (``kill``: SIGKILL a stdio server first, it is hung). Bounded:
        a transport that will not close in :data:`CLOSE_GRACE_S` is cancelled."""
        if self.state in ("running", "starting"):
            self.state = "stopped"
        if kill:
            guard.kill_group(self.pidfile)
        self._closing.set()
        if self._refresh is not None:
            self._refresh.cancel()
        done, _ = await asyncio.wait({self._task}, timeout=CLOSE_GRACE_S)
        if not done:
            guard.kill_group(self.pidfile)
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=CLOSE_GRACE_S)
        with contextlib.suppress(OSError):
            self.pidfile.unlink(missing_ok=True)


def _retrieved(future: asyncio.Future[None]) -> None:
    """Mark a failed start's exception as seen (a caller that gave up never awaits it)."""
    if not future.cancelled():
        future.exception()


def start_timeout(spec: ServerSpec) -> float:
    """How long a start may take: the call timeout, but at least :data:`START_TIMEOUT_S`."""
    return max(spec.timeout, START_TIMEOUT_S)


def _secret_aware(raw: Any, resolved: dict[str, str]) -> dict[str, str]:
    """``resolved``, with each value that came from a ``${VAR}`` reference added to the
    redactor, so a server echoing it never shows it (docs/architecture.md, "Tools from outside")."""
    for key, value in resolved.items():
        if value != raw.get(key):
            REDACT.add(value)
    return resolved


async def _list_all(session: Any) -> list[Any]:
    """Every tool the server lists, following ``nextCursor`` pages (at most 100 pages)."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


def _leaf(error: BaseException) -> str:
    """The first real exception inside (exception groups unwrapped), as one line."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, TimeoutError):
        text = "timed out"
    return text if len(text) <= 300 else text[:299] + "…"
