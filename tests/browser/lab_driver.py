"""Drive JupyterLab in a real Chromium: the notebook page plus the agent's view and transcript.

The browser tests check what users meet, so they go through JupyterLab's own front end
(:mod:`.lab_page`); this module adds the agent's side of the page (the live ``.mibyan-view``
and the static ``.mibyan-transcript`` an ``%%agent`` cell shows) and skips the browser tests
when Chromium or Playwright is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .lab_process import VENV_BIN, LabServer

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
# ``make test`` sets MIBYAN_NO_SKIP=1 after installing what they need: there a missing
# requirement fails the run instead of counting skipped browser tests as passing.
_MISSING = missing_requirement()
if _MISSING is not None:
    if os.environ.get("MIBYAN_NO_SKIP") == "1":
        raise RuntimeError(
            f"make test installs what the browser tests need (MIBYAN_NO_SKIP=1), yet {_MISSING}"
        )
    pytest.skip(_MISSING, allow_module_level=True)

from playwright.sync_api import Locator, Page  # noqa: E402

from .lab_artifacts import Artifacts  # noqa: E402
from .lab_page import CELL_TIMEOUT_MS, NotebookPage  # noqa: E402

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "Lab", "LabServer", "text"]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

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


class Lab(NotebookPage):
    """A test's JupyterLab page with the agent's view, and where its artifacts go."""

    def __init__(self, page: Page, server: LabServer, folder: str, artifacts: Artifacts) -> None:
        super().__init__(page, server, folder)
        self.artifacts = artifacts

    @property
    def page_errors(self) -> list[str]:
        """Uncaught exceptions in the page so far."""
        return self.artifacts.page_errors

    @property
    def console(self) -> list[str]:
        """Every console message of the page so far, as "type: text"."""
        return self.artifacts.console

    def screenshot(self, label: str) -> None:
        """A screenshot of a moment worth seeing (the fixture takes the final one)."""
        self.artifacts.screenshot(self.page, label)

    # -- the agent's view and transcript -------------------------------------------------------

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


def text(locator: Locator) -> str:
    """The text of an element, hidden parts included (a collapsed ``details``, a cell that
    JupyterLab's windowing has not laid out); ``innerText`` would leave those out."""
    return locator.text_content() or ""
