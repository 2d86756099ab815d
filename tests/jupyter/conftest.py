"""Fixtures shared by the Jupyter layer's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from kernel_driver import KernelDriver
from traitlets.config import Config

from mibyan_jupyter.testing import FakeProviderServer


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """A real InteractiveShell (a singleton: cleared afterwards) with history in memory."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    instance = InteractiveShell.instance(config=config)
    try:
        yield instance
    finally:
        InteractiveShell.clear_instance()


@pytest.fixture
def loaded_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """A real InteractiveShell with the extension loaded, in a folder of its own: its own
    session database and memory folder, no provider key, the demo model without delays,
    a fresh kernel state (cleared again afterwards)."""
    from mibyan_jupyter.jupyter.state import reset_kernel_state

    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "memory"))
    monkeypatch.setenv("MIBYAN_DEMO_DELAY", "0")
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "JPY_SESSION_NAME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    reset_kernel_state()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mibyan_jupyter")
    yield ip
    ip.run_line_magic("unload_ext", "mibyan_jupyter")
    reset_kernel_state()
    InteractiveShell.clear_instance()


@pytest.fixture
def server(fake_provider: FakeProviderServer) -> FakeProviderServer:
    """The loopback fake provider (the root conftest's), by the name the kernel tests use."""
    return fake_provider


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    """A real kernel in a folder of its own (its own memory folder too) with the extension
    loaded. A test file that needs another environment defines its own ``kernel``."""
    driver = KernelDriver(tmp_path, env={"MIBYAN_MEMORY_DIR": str(tmp_path / "memory")})
    try:
        loaded = driver.run("%load_ext mibyan_jupyter")
        assert (loaded.reply or {}).get("status") == "ok", (loaded.reply, loaded.text())
        yield driver
    finally:
        driver.close()
