"""run_shell with real processes: output and exit codes, the notebook folder as working
directory, and timeouts and aborts that kill the whole process group."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import AbortSignal, Tool, ToolContext, ToolResult
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.core.tools import ToolArgumentsError
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools, shell
from mibyan_jupyter.jupyter.kernel_tools.shell import run_command


def run_shell(root: Path) -> Tool:
    (tool,) = kernel_tools(["shell"], namespace={}, root=root)
    return tool


async def run(tool: Tool, signal: AbortSignal | None = None, **args: Any) -> ToolResult:
    result = await tool.execute(
        "call", tool.validate(args), signal or AbortSignal(), lambda _: None
    )
    assert isinstance(result, ToolResult)
    return result


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def real(path: Path) -> Path:
    return path.resolve()


def read_pid(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


async def wait_for_pid(path: Path) -> int:
    """The pid the command wrote to ``path``, once it has."""
    for _ in range(500):
        pid = read_pid(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def wait_dead(pids: list[int]) -> None:
    for _ in range(300):
        if not any(alive(p) for p in pids):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a process of the command survived")


async def test_output_exit_code_and_folder(tmp_path: Path) -> None:
    result = await run(run_shell(tmp_path), command="pwd; echo out; echo err >&2; cat")
    assert not result.is_error
    assert result.content == f"{real(tmp_path)}\nout\nerr\n[exit code 0]"
    assert result.details == {
        "command": "pwd; echo out; echo err >&2; cat",
        "exit_code": 0,
        "timed_out": False,
    }


async def test_failing_command_is_an_error_with_its_output(tmp_path: Path) -> None:
    result = await run(run_shell(tmp_path), command="ls does-not-exist")
    assert result.is_error
    text = content_text(result.content)
    assert "does-not-exist" in text
    assert text.endswith("[exit code 2]")
    silent = await run(run_shell(tmp_path), command="exit 4")
    assert silent.content == "(no output)\n[exit code 4]"


async def test_environment_is_passed_but_secrets_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_API_KEY", "sk-shell-0123456789abcdef")
    monkeypatch.setenv("GREETING", "hello from the kernel")
    result = await run(run_shell(tmp_path), command="echo $GREETING; echo $EXAMPLE_API_KEY; env")
    text = content_text(result.content)
    assert text.startswith("hello from the kernel\n[redacted]\n")
    assert "sk-shell" not in text
    assert "EXAMPLE_API_KEY=[redacted]" in text


async def test_long_output_is_bounded(tmp_path: Path) -> None:
    command = "seq -f 'line-%g' 1 40000"
    result = await run(run_shell(tmp_path), command=command)
    text = content_text(result.content)
    assert len(text) < 8_200
    assert text.startswith("line-1\nline-2\n")
    assert "characters omitted" in text
    assert text.endswith("line-40000\n[exit code 0]")


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; echo started; sleep 30"
    signal = AbortSignal()
    context = ToolContext("call", signal, lambda _: None)
    started = time.monotonic()
    result = await run_command(tmp_path, command, 0.3, context)
    assert time.monotonic() - started < 3
    assert result.is_error
    text = content_text(result.content)
    assert text.startswith("started\n")
    assert "timed out after 0.3 s; the command and its children were killed" in text
    assert result.details is not None
    assert result.details["timed_out"] is True
    await wait_dead([await wait_for_pid(tmp_path / "child.pid")])


def test_timeout_bounds(tmp_path: Path) -> None:
    tool = run_shell(tmp_path)
    for bad in (0, 10_000):
        with pytest.raises(ToolArgumentsError):
            tool.validate({"command": "true", "timeout": bad})


async def test_abort_kills_the_process_group(tmp_path: Path) -> None:
    signal = AbortSignal()
    command = "sleep 30 & echo $! > child.pid; echo $$ > shell.pid; sleep 30"
    task = asyncio.ensure_future(run(run_shell(tmp_path), signal, command=command))
    shell_pid = await wait_for_pid(tmp_path / "shell.pid")
    child_pid = await wait_for_pid(tmp_path / "child.pid")
    started = time.monotonic()
    signal.abort()
    result = await asyncio.wait_for(task, 3)
    assert time.monotonic() - started < 2
    assert result.is_error
    assert "killed by signal 9" in content_text(result.content)
    await wait_dead([shell_pid, child_pid])


async def test_cancellation_kills_the_process(tmp_path: Path) -> None:
    task = asyncio.ensure_future(run(run_shell(tmp_path), command="echo $$ > shell.pid; sleep 30"))
    shell_pid = await wait_for_pid(tmp_path / "shell.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_dead([shell_pid])


async def test_background_jobs_holding_the_output_are_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "DRAIN_SECONDS", 0.2)
    result = await run(run_shell(tmp_path), command="sleep 30 & echo $! > job.pid; echo done")
    text = content_text(result.content)
    assert text.startswith("done\n[exit code 0; background processes kept the output open")
    await wait_dead([await wait_for_pid(tmp_path / "job.pid")])


async def test_partial_output_is_streamed_in_chunks(tmp_path: Path) -> None:
    updates: list[ToolResult] = []
    tool = run_shell(tmp_path)
    command = "for i in 1 2 3 4; do echo tick-$i; sleep 0.1; done"
    result = await tool.execute(
        "call", tool.validate({"command": command}), AbortSignal(), updates.append
    )
    assert isinstance(result, ToolResult)
    assert not result.is_error
    assert len(updates) >= 2  # as the command prints, not only at its end
    assert "".join(str(u.content) for u in updates) == "".join(f"tick-{i}\n" for i in range(1, 5))
    assert all(u.details == {"stream": "stdout"} for u in updates)
