"""run_python captures at the file descriptor: os.system, subprocess children and C's printf
land in the result (redacted) and go live to the attached sink; fds 1 and 2 are put back on
every exit path (normal, exception, interrupt); a background child's later output goes,
redacted, to the restored fd; Stop from another thread ends blocking code within a second
as "stopped", while a SIGINT without Stop is Kernel > Interrupt (counted for the cell)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import Tool, ToolResult
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.interrupts import INTERRUPTED, STOPPED
from mibyan_jupyter.jupyter.kernel_tools.live import LIVE, STOPS

SECRET = "sk-fd-capture-0123456789abcdef"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FD_TEST_API_KEY", SECRET)  # a secret-named variable: redacted


@pytest.fixture
def live() -> Iterator[list[tuple[str, str, str]]]:
    seen: list[tuple[str, str, str]] = []
    detach = LIVE.attach(lambda call_id, stream, text: seen.append((call_id, stream, text)))
    yield seen
    detach()


def python_tool(interrupts: list[int]) -> Tool:
    (tool,) = kernel_tools(
        ["python"],
        namespace={},
        root=Path("."),
        shell=None,
        on_interrupt=lambda: interrupts.append(1),
    )
    return tool


def run(code: str, interrupts: list[int] | None = None) -> ToolResult:
    tool = python_tool([] if interrupts is None else interrupts)
    result = tool.execute("c1", tool.validate({"code": code}), AbortSignal(), lambda _: None)
    assert asyncio.iscoroutine(result)
    value: Any = asyncio.run(result)
    assert isinstance(value, ToolResult)
    return value


def fd_identity() -> list[tuple[int, int]]:
    return [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]


def test_system_subprocess_and_c_output_are_captured_redacted_and_live(
    env: None, live: list[tuple[str, str, str]]
) -> None:
    before = fd_identity()
    code = (
        "import ctypes, os, subprocess\n"
        "print('from python')\n"
        "os.system('echo from system $FD_TEST_API_KEY; echo to stderr >&2')\n"
        "subprocess.run(['echo', 'from a child'])\n"
        "ctypes.CDLL(None).printf(b'from C\\n');\n"
    )
    result = run(code)
    assert fd_identity() == before
    text = str(result.content)
    for expected in (
        "from python",
        "from system [redacted]",
        "to stderr",
        "from a child",
        "from C",
    ):
        assert expected in text, text
    assert SECRET not in text
    assert SECRET not in repr(result.details)
    printed = "".join(chunk for _, _, chunk in live)
    assert "from system" in printed
    assert "from C" in printed
    assert {stream for _, stream, _ in live} == {"stdout", "stderr"}
    assert {call for call, _, _ in live} == {"c1"}


@pytest.mark.parametrize(
    "code", ["import os; os.system('echo x'); 1 / 0", "raise KeyboardInterrupt", "raise SystemExit"]
)
def test_the_fds_are_put_back_on_every_exit_path(code: str) -> None:
    before = fd_identity()
    interrupts: list[int] = []
    run(code, interrupts)
    assert fd_identity() == before
    STOPS.take_interrupts()


def test_a_background_child_writes_later_to_the_restored_fd_redacted(
    env: None, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run("import os; os.system('(sleep 0.5; echo late $FD_TEST_API_KEY) &')")
    assert "late" not in str(result.content)
    time.sleep(1.0)
    out = capfd.readouterr().out
    assert "late [redacted]" in out
    assert SECRET not in out


def interrupt_main_after(delay: float, *, stop: bool) -> threading.Thread:
    def later() -> None:
        time.sleep(delay)
        if stop:
            assert STOPS.request_stop()
        else:
            main = threading.main_thread().ident
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=later)
    thread.start()
    return thread


def test_stop_ends_blocking_code_within_a_second_as_stopped() -> None:
    STOPS.take_interrupts()
    interrupts: list[int] = []
    thread = interrupt_main_after(0.3, stop=True)
    started = time.monotonic()
    result = run("import time\nprint('sleeping')\ntime.sleep(30)", interrupts)
    elapsed = time.monotonic() - started
    thread.join()
    assert elapsed < 1.0, elapsed
    assert str(result.content).startswith(STOPPED)
    assert result.details is not None
    assert result.details["stopped"] is True
    assert interrupts == []
    assert STOPS.take_interrupts() == 0
    assert not STOPS.request_stop()  # nothing blocks any more: Stop does nothing here


def test_sigint_without_stop_is_kernel_interrupt_and_is_counted() -> None:
    STOPS.take_interrupts()
    interrupts: list[int] = []
    thread = interrupt_main_after(0.3, stop=False)
    result = run("import time\ntime.sleep(30)", interrupts)
    thread.join()
    assert str(result.content).startswith(INTERRUPTED)
    assert result.details is not None
    assert "stopped" not in result.details
    assert interrupts == [1]
    assert STOPS.take_interrupts() == 1
