"""Drive JupyterLab in a real Chromium: the notebook page, its cells, the agent's outputs.

The browser tests check what users meet, so they go through JupyterLab's own front end. They
reach its state through ``window.jupyterapp`` (the server runs with
``--LabApp.expose_app_in_browser``) rather than CSS guesses, because the measured pitfall here
(notes/jupyter-testing.md) is a DOM "idle" indicator that matched before the kernel could take
a Shift+Enter. Every wait polls a condition; there is no fixed sleep.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lab_process import VENV_BIN, LabServer

CHROMIUM = Path("/usr/bin/chromium")


def missing_requirement() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (install it: tests/browser/ensure_chromium.sh)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright (Python) is not installed"
    if shutil.which("jupyter", path=str(VENV_BIN)) is None:
        return f"jupyter is not installed next to {sys.executable}"
    return None


# Every browser test module imports this one first, so this skips each of them cleanly (a
# skip in conftest.py would abort pytest when it is given this folder as an argument).
_MISSING = missing_requirement()
if _MISSING is not None:
    pytest.skip(_MISSING, allow_module_level=True)

from playwright.sync_api import Locator, Page  # noqa: E402

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "Lab", "LabServer", "artifact_name", "text"]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KERNEL_READY_TIMEOUT_MS = 30_000
CELL_TIMEOUT_MS = 30_000


_KERNEL = "window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel"

_CELL_DONE_JS = """(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  if (!cell) return false;
  const prompt = cell.node.querySelector('.jp-InputPrompt');
  const running = cell.model.executionState === 'running'
    || (prompt !== null && prompt.textContent.includes('*'));
  return !running && cell.model.executionCount !== null;
}"""


_WHILE_RUNNING_JS = """([i, arg]) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  const prompt = cell.node.querySelector('.jp-InputPrompt');
  const running = cell.model.executionState === 'running'
    || (prompt !== null && prompt.textContent.includes('*'));
  const value = running ? (PREDICATE)(cell, arg) : null;
  if (value) return { value };
  return running ? null : { ended: true };
}"""

LIVE_TEXT_LENGTH = """(cell, before) => {
  const texts = cell.node.querySelectorAll('.mibyan-view .mibyan-text');
  const length = Array.from(texts, (t) => t.textContent.length).reduce((a, b) => a + b, 0);
  return length > before ? length : 0;
}"""
"""Predicate for :meth:`Lab.wait_while_running`: the streamed text is longer than ``arg``."""


class Lab:
    """One JupyterLab page showing one notebook, with the few actions the tests need."""

    def __init__(self, page: Page, server: LabServer) -> None:
        self.page = page
        self.server = server
        self.name = ""
        self.problems: list[str] = []  # page errors and console errors, for failure messages
        self.artifact_stem: Path | None = None  # set by the fixture: artifacts/<test name>

    def screenshot(self, label: str) -> None:
        """A screenshot of a moment worth seeing (the fixture takes the final one)."""
        if self.artifact_stem is not None:
            self.artifact_stem.parent.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=f"{self.artifact_stem}-{label}.png")

    # -- notebooks -----------------------------------------------------------------------------

    def open_notebook(self, name: str, cells: Sequence[str]) -> None:
        """Write ``name`` with ``cells`` and open it alone in the page, kernel ready."""
        self.server.write_notebook(name, cells)
        self.goto(name)

    def goto(self, name: str, *, wait_kernel: bool = True) -> None:
        """Load JupyterLab showing only ``name`` (a full page load, like a reload)."""
        self.name = name
        self.page.goto(f"{self.server.url}/lab/tree/{name}?reset&token={self.server.token}")
        self.wait_notebook_shown()
        if wait_kernel:
            self.wait_kernel_ready()

    def open_in_app(self, name: str, cells: Sequence[str]) -> None:
        """Write ``name`` and open it next to what is open, as a user would from the file
        browser (no page load: cheaper than :meth:`open_notebook`); kernel ready."""
        self.server.write_notebook(name, cells)
        self.name = name
        self.page.evaluate(
            "(path) => { void window.jupyterapp.commands.execute('docmanager:open', { path }); }",
            name,
        )
        self.wait_notebook_shown()
        self.wait_kernel_ready()

    def wait_notebook_shown(self) -> None:
        self.page.wait_for_function(
            """(name) => {
              const w = window.jupyterapp?.shell?.currentWidget;
              return !!w && !!w.context && w.context.path === name && w.context.isReady
                && !!w.content && w.content.widgets.length > 0;
            }""",
            arg=self.name,
            timeout=KERNEL_READY_TIMEOUT_MS,
        )

    def wait_kernel_ready(self, timeout_ms: int = KERNEL_READY_TIMEOUT_MS) -> None:
        self.page.wait_for_function(
            f"""() => {{
              const k = {_KERNEL};
              return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
            }}""",
            timeout=timeout_ms,
        )

    def cell_count(self) -> int:
        return int(
            self.page.evaluate("window.jupyterapp.shell.currentWidget.content.widgets.length")
        )

    # -- cells ---------------------------------------------------------------------------------

    def cell(self, index: int) -> Locator:
        return self.page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell").nth(index)

    def output(self, index: int) -> Locator:
        return self.cell(index).locator(".jp-OutputArea")

    def start_cell(self, index: int) -> None:
        """Run cell ``index`` with JupyterLab's own 'Run selected cell' command and return
        once it is running (or already done): the command's promise resolves only when the
        cell ends, which for an agent waiting on a click would be never."""
        started = self.page.evaluate(
            """(i) => {
              const panel = window.jupyterapp.shell.currentWidget;
              const cell = panel.content.widgets[i];
              if (!cell) return false;
              panel.content.activeCellIndex = i;
              panel.content.deselectAll();
              void window.jupyterapp.commands.execute('notebook:run-cell');
              return true;
            }""",
            index,
        )
        assert started, f"{self.name} has no cell {index}"
        self.page.wait_for_function(
            """(i) => {
              const model = window.jupyterapp.shell.currentWidget.content.widgets[i].model;
              return model.executionState === 'running' || model.executionCount !== null;
            }""",
            arg=index,
            timeout=10_000,
        )

    def wait_cell_done(self, index: int, timeout_ms: int = CELL_TIMEOUT_MS) -> None:
        try:
            self.page.wait_for_function(_CELL_DONE_JS, arg=index, timeout=timeout_ms)
        except Exception as error:
            raise AssertionError(
                f"cell {index} of {self.name} did not finish within {timeout_ms} ms; "
                f"its output: {self.output_text(index)!r}"
            ) from error

    def cell_running(self, index: int) -> bool:
        return not bool(self.page.evaluate(_CELL_DONE_JS, index))

    def run_cell(self, index: int, timeout_ms: int = CELL_TIMEOUT_MS) -> str:
        """Run cell ``index`` to its end; return its output's visible text."""
        self.start_cell(index)
        self.wait_cell_done(index, timeout_ms)
        return self.output_text(index)

    def output_text(self, index: int) -> str:
        return str(
            self.page.evaluate(
                """(i) => {
                  const cell = window.jupyterapp.shell.currentWidget?.content?.widgets[i];
                  if (!cell) return '';
                  const outs = cell.node.querySelectorAll('.jp-OutputArea-output');
                  return Array.from(outs, (o) => o.innerText || o.textContent).join('\\n');
                }""",
                index,
            )
        )

    def execution_count(self, index: int) -> int | None:
        value = self.page.evaluate(
            "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionCount",
            index,
        )
        return None if value is None else int(value)

    def error_outputs(self, index: int) -> list[str]:
        """Tracebacks the cell printed (for failure messages)."""
        outputs = self.page.evaluate(
            """(i) => window.jupyterapp.shell.currentWidget.content.widgets[i]
                 .model.outputs.toJSON()""",
            index,
        )
        return [
            f"{o.get('ename')}: {o.get('evalue')}"
            for o in outputs
            if isinstance(o, dict) and o.get("output_type") == "error"
        ]

    # -- the agent's view and transcript (DOM contract: /tmp/brief/common.md) -----------------

    def view(self, index: int) -> Locator:
        """The live view of an ``%%agent`` cell (while it runs)."""
        return self.output(index).locator(".mibyan-view")

    def transcript(self, index: int) -> Locator:
        """The static output that replaces the live view when the run ends."""
        return self.output(index).locator(".mibyan-transcript")

    def wait_while_running(
        self, index: int, predicate: str, what: str, *, arg: Any = None, timeout_ms: int = 20_000
    ) -> Any:
        """Wait until the JS ``predicate(cell, arg)`` is truthy while cell ``index`` still
        runs, and return its value; fail at once, saying so, if the cell ends first."""
        script = _WHILE_RUNNING_JS.replace("PREDICATE", predicate)
        try:
            handle = self.page.wait_for_function(script, arg=[index, arg], timeout=timeout_ms)
        except Exception as error:
            raise AssertionError(
                f"cell {index}: no {what} within {timeout_ms} ms while it ran; "
                f"output: {self.output_text(index)[:1500]!r}"
            ) from error
        result = handle.json_value()
        if "value" not in result:
            raise AssertionError(
                f"cell {index} ended before {what}; errors: {self.error_outputs(index)}; "
                f"output: {self.output_text(index)[:1500]!r}"
            )
        return result["value"]

    def wait_live_text(self, index: int, *, longer_than: int = 0, timeout_ms: int = 20_000) -> int:
        """Wait, while the cell still runs, until the live view's streamed text
        (``.mibyan-text``) is longer than ``longer_than`` characters; return its length."""
        what = f"live .mibyan-text longer than {longer_than} characters"
        return int(
            self.wait_while_running(
                index, LIVE_TEXT_LENGTH, what, arg=longer_than, timeout_ms=timeout_ms
            )
        )

    def run_to_transcript(self, index: int, timeout_ms: int = CELL_TIMEOUT_MS) -> Locator:
        """Run an ``%%agent`` (or ``%agent resume``) cell that needs no click; its transcript."""
        self.start_cell(index)
        return self.wait_transcript(index, timeout_ms)

    def wait_transcript(self, index: int, timeout_ms: int = CELL_TIMEOUT_MS) -> Locator:
        """Wait for the cell to end and show its transcript; fail saying what it showed."""
        self.wait_cell_done(index, timeout_ms)
        transcript = self.transcript(index).first
        try:
            transcript.wait_for(state="visible", timeout=5_000)
        except Exception as error:
            raise AssertionError(
                f"cell {index} ended without a .mibyan-transcript; errors: "
                f"{self.error_outputs(index)}; output: {self.output_text(index)[:2000]!r}"
            ) from error
        return transcript

    # -- kernel and document -------------------------------------------------------------------

    def save(self) -> None:
        self.page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
            timeout=10_000,
        )

    def restart_kernel(self) -> None:
        """Restart through the kernel connection (no confirmation dialog), then wait."""
        self.page.evaluate(f"async () => {{ await {_KERNEL}.restart(); }}")
        self.wait_kernel_ready()

    def shutdown_kernel(self) -> None:
        self.page.evaluate(
            "async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }"
        )
        self.page.wait_for_function(f"() => !{_KERNEL}", timeout=10_000)


def text(locator: Locator) -> str:
    """The text of an element, hidden parts included (a collapsed ``details``, a cell that
    JupyterLab's windowing has not laid out); ``innerText`` would leave those out."""
    return locator.text_content() or ""


def artifact_name(nodeid_name: str) -> str:
    """A file name for a test's screenshot (parametrized ids made safe)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid_name).strip("_") or "test"
