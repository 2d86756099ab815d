"""A tool plugin in a real ipykernel: the kernel sees a temporary site dir (PYTHONPATH) with
an installed plugin distribution. ``%load_ext`` reads no entry point and imports no
plugin; a ``%%agent --tools default,weather`` cell (the loopback fake model) calls the
plugin's tool and its result reaches the model's next request, while a broken plugin it
also names is one line in the cell's output and changes nothing else; ``%agent tools``
lists the plugin with its package, and the entry points were read by then."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_driver import KernelDriver
from plugin_support import BROKEN, add_package, weather_site

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

SPY = """\
import sys, importlib.metadata as metadata
SEEN = []
_real_entry_points = metadata.entry_points
def _spy(*args, **kwargs):
    SEEN.append(kwargs.get("group"))
    return _real_entry_points(*args, **kwargs)
metadata.entry_points = _spy
"""
LOOK = 'print("read:", "mibyan_jupyter.tools" in SEEN, "imported:", "weather_tools" in sys.modules)'


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    """A kernel (extension not loaded yet) whose Python path holds the plugin's site dir."""
    site = weather_site(tmp_path / "site")
    add_package(site, "broken-tools", "broken_tools", BROKEN, {"broken": "broken_tools:group"})
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "MIBYAN_MEMORY_DIR": str(tmp_path / "memory")}
    driver = KernelDriver(tmp_path, env=env)
    try:
        yield driver
    finally:
        driver.close()


def ok(kernel: KernelDriver, code: str, timeout: float = 30) -> str:
    execution = kernel.run(code, timeout)
    assert (execution.reply or {}).get("status") == "ok", execution.text()[-3000:]
    return execution.text()


def test_a_cell_calls_the_plugin_tool_and_load_ext_reads_no_entry_point(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    ok(kernel, SPY)
    ok(kernel, "%load_ext mibyan_jupyter")
    assert ok(kernel, LOOK).strip() == "read: False imported: False"

    server.push(FakeReply(calls=[FakeCall("forecast", {"city": "Paris"})]), FakeReply("Sunny."))
    cell = f"%%agent --model fake:demo@{server.base_url} --tools default,weather,broken\nWeather?"
    said = [line for line in ok(kernel, cell, timeout=60).splitlines() if "mibyan: plugin" in line]
    assert len(said) == 1, said
    assert (
        "'broken' (broken-tools: broken_tools:group) failed to load: ModuleNotFoundError" in said[0]
    )
    first, second = (r.body for r in server.requests[-2:])
    assert first is not None
    assert second is not None
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered[-2:] == ["forecast", "set_alert"], offered
    assert "run_python" in offered, "the default groups come too"
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results == ["Sunny in Paris, 21 C"]
    assert ok(kernel, LOOK).strip() == "read: True imported: True"
    rows = kernel.query("SELECT name, status, requested_at FROM tool_calls")
    assert rows == [("forecast", "done", None)], "read-only: run without asking"

    listed = ok(kernel, "%agent tools")
    assert "plugin weather-tools" in listed
    assert "asks: set_alert; runs freely: forecast" in listed
