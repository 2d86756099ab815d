"""The "shell" group: ``run_shell``, a command run in the notebook's folder.

Why a new session (process group) per command: a timeout or Stop must end everything the
command started (``make`` and its compilers, a pipeline), and signalling the group is the
only way to reach grandchildren. The command's stdout and stderr are merged, in the order
they were written, and only a head and a tail are kept, so a chatty command cannot exhaust
memory. The environment is passed on as is (commands need PATH, virtualenvs, credentials
of their own), but nothing the tool returns echoes it and known secrets are redacted from
the output. stdin is closed, so a command waiting for input fails instead of hanging.
POSIX only, like the kernels this runs in.

While it runs, each piece of output goes to ``on_update`` as it arrives, as a chunk
(``ToolResult(content=text, details={"stream": "stdout"})``; the live view shows chunks on
the card, throttled and redacted there): the loop is free while a command runs, so the
event stream carries them, unlike ``run_python``'s (``live.py``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Annotated

from pydantic import Field

from mibyan_jupyter.core.tools import Tool, ToolContext, ToolResult, tool
from mibyan_jupyter.jupyter.kernel_tools.text import for_model

MAX_TIMEOUT = 1_800
KEPT_BYTES = 128 * 1024
"""Bytes of output kept from the start and from the end of the output each."""
DRAIN_SECONDS = 1.0
"""How long to wait for output after the command exits (background jobs holding it)."""
GRACE_SECONDS = 1.0
"""Between SIGTERM and SIGKILL on a timeout."""


class _Output:
    """The first and the last ``KEPT_BYTES`` of a byte stream, and its total length."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = KEPT_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - KEPT_BYTES)]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        omitted = self.total - len(self.head) - len(self.tail)
        gap = f"\n… [{omitted:,} bytes omitted] …\n" if omitted else ""
        return head + gap + self.tail.decode("utf-8", "replace")


class _Protocol(asyncio.SubprocessProtocol):
    """Output as it arrives; ``exited`` when the command's process ends and ``closed``
    when the output pipe is closed too. Separate because background jobs (``cmd &``) can
    hold the pipe open long after the command itself has exited (and ``Process.wait()``
    waits for the pipe as well)."""

    def __init__(self, output: _Output, ctx: ToolContext) -> None:
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._output = output
        self._ctx = ctx
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data if isinstance(data, bytes) else data.encode()
        self._output.add(chunk)
        text = self._decoder.decode(chunk)
        if text:  # a chunk of the card's live output (stdout and stderr are merged)
            self._ctx.on_update(ToolResult(content=text, details={"stream": "stdout"}))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Whether ``future`` completes within ``seconds`` (it is never cancelled)."""
    try:
        await asyncio.wait_for(asyncio.shield(future), seconds)
    except TimeoutError:
        return False
    return True


async def run_command(root: Path, command: str, seconds: float, ctx: ToolContext) -> ToolResult:
    output = _Output()
    transport, protocol = await asyncio.get_running_loop().subprocess_shell(
        lambda: _Protocol(output, ctx),
        command,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        executable=shutil.which("bash"),
    )
    pid = transport.get_pid()
    remove = ctx.signal.add_listener(lambda: _signal_group(pid, signal.SIGKILL))
    notes: list[str] = []
    timed_out = False
    try:
        if not await _within(protocol.exited, seconds):
            timed_out = True
            notes.append(f"timed out after {seconds:g} s; the command and its children were killed")
            _signal_group(pid, signal.SIGTERM)
            if not await _within(protocol.exited, GRACE_SECONDS):
                _signal_group(pid, signal.SIGKILL)
                await _within(protocol.exited, GRACE_SECONDS)
        if not await _within(protocol.closed, DRAIN_SECONDS):
            notes.append(
                "background processes kept the output open and were stopped "
                "(start them with nohup or setsid, output redirected, to keep them running)"
            )
    finally:
        remove()
        _signal_group(pid, signal.SIGKILL)  # whatever is left of the group
        # Reap the shell before closing, also when the call was cancelled: otherwise the
        # child watcher may not have seen it exit yet and the process is left a zombie.
        await _within(protocol.exited, GRACE_SECONDS)
        transport.close()
    code = transport.get_returncode()
    code = -signal.SIGKILL if code is None else code
    status = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
    text = output.text().rstrip("\n") or "(no output)"
    footer = "; ".join([status, *notes])
    return ToolResult(
        content=for_model(f"{text}\n[{footer}]"),
        details={"command": command, "exit_code": code, "timed_out": timed_out},
        is_error=code != 0 or bool(notes),
    )


def shell_tools(*, root: Path) -> list[Tool]:
    root = root.resolve()

    @tool(sequential=True)
    # ``timeout`` is the model's argument (a number in the schema), enforced inside.
    async def run_shell(
        ctx: ToolContext,
        command: str,
        timeout: Annotated[int, Field(ge=1, le=MAX_TIMEOUT)] = 60,  # noqa: ASYNC109
    ) -> ToolResult:
        """Run a shell command (bash) in the notebook's folder and return its combined
        stdout and stderr (long output is shortened) and its exit code. It cannot read
        input; it is stopped after `timeout` seconds, together with every process it started.

        Args:
            command: The command line, e.g. "ls -la data" or "pip list | grep pandas".
            timeout: Seconds before the command is killed.
        """
        return await run_command(root, command, timeout, ctx)

    return [run_shell]
