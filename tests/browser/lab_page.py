"""One JupyterLab page showing notebooks of one test's folder: open, run, save, restart.

This is JupyterLab's side only (nothing of mibyan_jupyter; :mod:`.lab_driver` adds the agent's
view). It reaches JupyterLab's state through ``window.jupyterapp`` (the server runs with
``--LabApp.expose_app_in_browser``) rather than CSS guesses, because the measured pitfall here
is a DOM "idle" indicator that matched before the kernel could take a Shift+Enter. Every wait
polls a condition; there is no fixed sleep.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .lab_process import STORE_FILE, LabServer

if TYPE_CHECKING:  # this module must load without Playwright (lab_driver skips then)
    from playwright.sync_api import Locator, Page

KERNEL_READY_TIMEOUT_MS = 30_000
CELL_TIMEOUT_MS = 30_000

KERNEL = "window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel"

CELL_DONE_JS = """(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  if (!cell) return false;
  const prompt = cell.node.querySelector('.jp-InputPrompt');
  const running = cell.model.executionState === 'running'
    || (prompt !== null && prompt.textContent.includes('*'));
  return !running && cell.model.executionCount !== null;
}"""


class NotebookPage:
    """A page on the shared server, working in its test's own folder ``folder``."""

    def __init__(self, page: Page, server: LabServer, folder: str) -> None:
        self.page = page
        self.server = server
        self.folder = folder  # relative to the server's root: the test's own folder
        self.name = ""  # the notebook shown, relative to the server's root

    def path(self, name: str) -> str:
        """The server path (relative to its root) of the file ``name`` of this test's folder."""
        return f"{self.folder}/{name}"

    @property
    def folder_path(self) -> Path:
        """This test's folder on disk: kernels start in it, so files there are theirs to read."""
        return self.server.root_dir / self.folder

    @property
    def db_path(self) -> Path:
        """The session store the kernels of this test's notebooks use."""
        return self.folder_path / STORE_FILE

    def read_notebook(self, name: str) -> dict[str, Any]:
        return self.server.read_notebook(self.path(name))

    # -- notebooks -----------------------------------------------------------------------------

    def open_notebook(self, name: str, cells: Sequence[str]) -> None:
        """Write ``name`` with ``cells`` and open it alone in the page, kernel ready."""
        self.server.write_notebook(self.path(name), cells)
        self.goto(name)

    def goto(self, name: str, *, wait_kernel: bool = True) -> None:
        """Load JupyterLab showing only ``name`` (a full page load, like a reload)."""
        self.name = self.path(name)
        self.page.goto(f"{self.server.url}/lab/tree/{self.name}?reset&token={self.server.token}")
        self.wait_notebook_shown()
        if wait_kernel:
            self.wait_kernel_ready()

    def open_in_app(self, name: str, cells: Sequence[str]) -> None:
        """Write ``name`` and open it next to what is open, as a user would from the file
        browser (no page load: cheaper than :meth:`open_notebook`); kernel ready."""
        self.name = self.path(name)
        self.server.write_notebook(self.name, cells)
        self.page.evaluate(
            "(path) => { void window.jupyterapp.commands.execute('docmanager:open', { path }); }",
            self.name,
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
              const k = {KERNEL};
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
            self.page.wait_for_function(CELL_DONE_JS, arg=index, timeout=timeout_ms)
        except Exception as error:
            raise AssertionError(
                f"cell {index} of {self.name} did not finish within {timeout_ms} ms; "
                f"its output: {self.output_text(index)!r}"
            ) from error

    def cell_running(self, index: int) -> bool:
        return not bool(self.page.evaluate(CELL_DONE_JS, index))

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

    # -- kernel and document -------------------------------------------------------------------

    def save(self) -> None:
        self.page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
            timeout=10_000,
        )

    def restart_kernel(self) -> None:
        """Restart through the kernel connection (no confirmation dialog), then wait."""
        self.page.evaluate(f"async () => {{ await {KERNEL}.restart(); }}")
        self.wait_kernel_ready()

    def shutdown_kernel(self) -> None:
        self.page.evaluate(
            "async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }"
        )
        self.page.wait_for_function(f"() => !{KERNEL}", timeout=10_000)
