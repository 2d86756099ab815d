"""The fallback mode on kernels that cannot deliver clicks while a cell awaits its run
(ipykernel < 7.4, Colab's runtime): the cell says so once, the policy decides approvals at
once (no wait for a click, never a blocking ``input()``), the answer still streams to the
live view, and the saved output is the final render (docs/architecture.md, "Running
inside the kernel").

The real-kernel tests start kernels from venvs of their own, one per ipykernel 6.x the
package is tested with (the oldest it allows and the newest), which ``make
ipykernel6-venvs`` builds into build/ (tests never reach a package registry); without
them these tests skip, except under ``MIBYAN_NO_SKIP=1``, where they fail.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_driver import KEYS, KernelDriver

from mibyan_jupyter.jupyter.entry.capabilities import kernel_limits
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("6.17.1", "6.31.0")
"""The Makefile's ``IPYKERNEL6``: the venvs are build/ipykernel-<version>-venv."""
NOTICE = "cannot deliver clicks while a cell runs, so here approvals are decided by the policy"


# -- deciding the capability (no kernel needed) -----------------------------------------------


def _shell_with_kernel(module: str) -> Any:
    kernel_class = type("Kernel", (), {"__module__": module})
    return types.SimpleNamespace(kernel=kernel_class())


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("6.17.1", "ipykernel 6.17.1"),
        ("6.31.0", "ipykernel 6.31.0"),
        ("7.3.0", "ipykernel 7.3.0"),
        ("7.4.0", None),
        ("8.0.0a1", None),
    ],
)
def test_the_ipykernel_version_decides_the_mode(
    monkeypatch: pytest.MonkeyPatch, version: str, expected: str | None
) -> None:
    monkeypatch.setitem(sys.modules, "ipykernel", types.SimpleNamespace(__version__=version))
    assert kernel_limits(_shell_with_kernel("ipykernel.ipkernel")) == expected


def test_colabs_kernel_and_no_kernel() -> None:
    assert kernel_limits(_shell_with_kernel("google.colab._kernel")) == "Colab's kernel"
    # Plain IPython has no kernel: the view's handshake finds there is no front end.
    assert kernel_limits(types.SimpleNamespace(kernel=None)) is None


def test_in_a_limited_kernel_the_policy_decides_at_once_and_the_cell_says_so_once(
    loaded_shell: InteractiveShell,
    fake_provider: FakeProviderServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In process: what ``%load_ext`` decides in such a kernel, then one cell."""
    loaded_shell.run_line_magic("config", "AgentMagics.headless_wait = 30")
    kernel_state().kernel_limits = "ipykernel 6.29.5"
    fake_provider.push(
        FakeReply("Running it.", calls=[FakeCall("run_python", {"code": "print(6 * 7)"})]),
        FakeReply("It was denied."),
    )
    started = time.monotonic()
    result = loaded_shell.run_cell(
        f"%%agent --model fake:m@{fake_provider.base_url} --tools python\nCompute 6 * 7.\n"
    )
    elapsed = time.monotonic() - started
    assert result.error_in_exec is None, result.error_in_exec
    assert elapsed < 15, f"the cell waited {elapsed:.1f} s for a click that cannot come"
    err = capsys.readouterr().err
    assert err.count(NOTICE) == 1, err
    assert "mibyan: this kernel (ipykernel 6.29.5)" in err
    tool_message = _tool_results(fake_provider.requests[-1].body)
    assert "this kernel (ipykernel 6.29.5) cannot deliver clicks" in tool_message
    assert "42" not in tool_message


def _tool_results(body: object) -> str:
    assert isinstance(body, dict)
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "tool")


# -- a real kernel running ipykernel 6.x --------------------------------------------------------


class VenvKernel(KernelDriver):
    """:class:`KernelDriver` on a kernel started from another venv's Python."""

    def __init__(self, workdir: Path, venv: Path) -> None:
        kernels = workdir / "kernels"
        spec = kernels / "ipykernel6"
        spec.mkdir(parents=True)
        argv = [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec_json = {"argv": argv, "display_name": "ipykernel 6", "language": "python"}
        (spec / "kernel.json").write_text(json.dumps(spec_json))
        environment = {k: v for k, v in os.environ.items() if k not in KEYS}
        environment["MIBYAN_DB"] = str(workdir / "sessions.sqlite3")
        environment["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # debugpy's startup warning
        self.db_path = workdir / "sessions.sqlite3"
        self.manager = KernelManager(
            kernel_name="ipykernel6", kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels])
        )
        self.manager.start_kernel(cwd=str(workdir), env=environment)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.executions = {}
        self.comms = {}
        self.comm_messages = []


def _venv(version: str) -> Path:
    venv = ROOT / "build" / f"ipykernel-{version}-venv"
    if not (venv / ".installed").exists():
        why = f"{venv} is missing: `make ipykernel6-venvs` builds it (from the package registry)"
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return venv


@pytest.fixture(scope="module", params=VERSIONS)
def kernel6(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, VenvKernel]]:
    """A kernel of ``ipykernel==<version>`` with the extension loaded (one per version)."""
    version: str = request.param
    venv = _venv(version)
    driver = VenvKernel(tmp_path_factory.mktemp(f"ipykernel-{version}"), venv)
    try:
        assert driver.run("%load_ext mibyan_jupyter", timeout=60).reply["status"] == "ok"  # type: ignore[index]
        shown = driver.run("import ipykernel; print(ipykernel.__version__)").text()
        assert shown.strip() == version, shown
        # Waiting for a click would now take 30 s: the cells below must not wait at all.
        driver.run("%config AgentMagics.headless_wait = 30")
        yield version, driver
    finally:
        driver.close()


def _streamed_text(driver: KernelDriver, start: int) -> str:
    """The text the live view was sent as it streamed (its ``text`` ops, in order), from
    the ``start``-th comm message on."""
    parts: list[str] = []
    for message in driver.comm_messages[start:]:
        content = message.get("data", {}).get("content")
        for op in content[1:] if isinstance(content, list) else []:
            if isinstance(op, str):
                parts.append(op)  # a delta continuing the previous text op
            elif isinstance(op, list) and op[:1] == ["text"]:
                parts.append(op[2])
    return "".join(parts)


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ipykernel6_cell_streams_and_the_policy_decides(
    kernel6: tuple[str, VenvKernel], fake_provider: FakeProviderServer
) -> None:
    version, driver = kernel6
    fake_provider.push(
        FakeReply("I will run it.", calls=[FakeCall("run_python", {"code": "print(6 * 7)"})]),
        FakeReply("The answer is forty-two, streamed to the live view."),
    )
    before = len(driver.comm_messages)
    cell = f"%%agent --model fake:m@{fake_provider.base_url} --tools python\nCompute 6 * 7."
    execution = driver.execute(cell)
    driver.finish(execution, 20, "the cell to finish without waiting for a click")
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    streams = [o["content"]["text"] for o in execution.outputs if o["msg_type"] == "stream"]
    assert "".join(streams).count(NOTICE) == 1, streams
    assert f"this kernel (ipykernel {version})" in "".join(streams)
    ((decision, by, reason),) = driver.query("SELECT decision, decided_by, reason FROM tool_calls")
    assert (decision, by) == ("denied", "policy")
    assert f"ipykernel {version}" in reason
    assert not any("42" in text for text in streams), "run_python must not have run"
    # Streaming: the live view got the answer as text ops while the cell ran ...
    streamed = _streamed_text(driver, before)
    assert "The answer is forty-two, streamed to the live view." in streamed
    # ... and the saved output is the final render, replacing the widget.
    (final,) = [o for o in execution.outputs if o["msg_type"] == "update_display_data"]
    assert "mibyan-transcript" in final["content"]["data"]["text/html"]
    assert "forty-two" in final["content"]["data"]["text/html"]


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ipykernel6_approve_auto_still_runs_the_tool(
    kernel6: tuple[str, VenvKernel], fake_provider: FakeProviderServer
) -> None:
    _version, driver = kernel6
    fake_provider.push(
        FakeReply("Running.", calls=[FakeCall("run_python", {"code": "print(6 * 7)"})]),
        FakeReply("Done."),
    )
    model = f"fake:m@{fake_provider.base_url}"
    execution = driver.run(f"%%agent --model {model} --tools python --approve auto\nGo.", 20)
    assert (execution.reply or {}).get("status") == "ok", execution.reply
    assert execution.text().count(NOTICE) == 1  # every cell says it once
    assert "42" in _tool_results(fake_provider.requests[-1].body)
