"""``%%agent`` in Notebook 7 (``jupyter notebook``), in a real Chromium: the answer streams
into the live view, an approval card is approved and the tool's result reaches the model,
Stop ends a run whose tool is still blocking, and on a kernel from the ipykernel 6.31 venv
(``make ipykernel6-venvs``) the cell says once what is unavailable and the policy decides
(issue 12, part 8).

Notebook 7 is built from JupyterLab's components, so the page is driven the same way as
JupyterLab (:class:`~.lab_driver.Lab`, through ``window.jupyterapp``); only the server
(``jupyter notebook``) and the notebook's address (``/notebooks/<path>``) differ. The
kernel is a process of the server, so the loopback fake provider runs here and the cells
name it as their model. One module: one Notebook 7 server for its tests.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mibyan_jupyter.jupyter.kernel_tools.interrupts import STOPPED
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text
from .lab_process import BUILT_LABEXTENSION, SERVER_START_TIMEOUT_S, VENV_BIN, LabServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LOAD = "%load_ext mibyan_jupyter"


class Notebook7Server(LabServer):
    """``jupyter notebook`` (Notebook 7) set up like the JupyterLab of the other tests."""

    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            str(VENV_BIN / "jupyter"),
            "notebook",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--allow-root",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--JupyterNotebookApp.expose_app_in_browser=True",
            "--ServerApp.port_retries=0",
        ]
        with self.log_path.open("wb") as log:
            self.process = process = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.root_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"jupyter notebook exited early:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jupyter notebook did not answer /api/status:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()  # SIGTERM: the server shuts its kernels down
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class Notebook7(Lab):
    """A Notebook 7 page: one notebook per page, at ``/notebooks/<path>``."""

    def goto(self, name: str, *, wait_kernel: bool = True) -> None:
        self.name = self.path(name)
        self.page.goto(f"{self.server.url}/notebooks/{self.name}?token={self.server.token}")
        self.wait_notebook_shown()
        if wait_kernel:
            self.wait_kernel_ready()


@pytest.fixture(scope="module")
def notebook7_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook7Server]:
    if shutil.which("jupyter-notebook", path=str(VENV_BIN)) is None:
        why = "Notebook 7 is not installed (the test extras have `notebook`)"
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            pytest.fail(why)
        pytest.skip(why)
    built = BUILT_LABEXTENSION if (BUILT_LABEXTENSION / "package.json").exists() else None
    server = Notebook7Server(tmp_path_factory.mktemp("notebook7"), labextension=built)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nb7(
    request: pytest.FixtureRequest, notebook7_server: Notebook7Server, chromium: Browser
) -> Iterator[Notebook7]:
    """Like conftest.py's ``lab``, on the Notebook 7 server."""
    from .lab_artifacts import Artifacts, artifact_name

    name = artifact_name(f"{Path(request.node.path).stem}.{request.node.name}")
    artifacts = Artifacts(name)
    notebook7_server.new_folder(name)
    log_start = notebook7_server.log_size()
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    artifacts.listen(page)
    try:
        yield Notebook7(page, notebook7_server, name, artifacts)
    finally:
        artifacts.save(page, notebook7_server.log_since(log_start))
        context.close()
        notebook7_server.shutdown_kernels()


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def tool_results(server: FakeProviderServer) -> str:
    body = server.requests[-1].body
    assert isinstance(body, dict)
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "tool")


NOTEBOOK7_OWN_ERROR = "Cannot read properties of undefined (reading 'schema')"
"""Notebook 7.6.5's own page error as it loads its settings (notebook_core.js): measured
with the mibyan-jupyter extension disabled, it is still thrown."""


def page_errors(page: Notebook7) -> list[str]:
    """The page's uncaught errors, but Notebook 7's own."""
    return [error for error in page.page_errors if NOTEBOOK7_OWN_ERROR not in error]


def stored_tool_results(page: Notebook7) -> list[str]:
    with sqlite3.connect(page.db_path) as db:
        rows = db.execute("SELECT data FROM messages WHERE role = 'tool' ORDER BY id").fetchall()
    return [str(row[0]) for row in rows]


APPROVE_BUTTON = (
    "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-approval button.mibyan-approve')"
)


@pytest.mark.timeout(180)
def test_notebook7_streams_and_an_approved_tool_runs(
    nb7: Notebook7, server: FakeProviderServer
) -> None:
    server.push(
        FakeReply(
            "First I will compute six times seven with Python.",
            calls=[FakeCall("run_python", {"code": "print(6 * 7)"}, id="c1")],
        ),
        FakeReply("Python says the product is 42."),
    )
    model = f"fake:m@{server.base_url}"
    cell = f"%%agent --model {model} --tools python\nWhat is 6 * 7?"
    nb7.open_notebook("stream-approve.ipynb", [LOAD, cell])
    nb7.run_cell(0)
    nb7.start_cell(1)
    # The reply's text streamed into the live view while the run waits for the click.
    nb7.wait_while_running(1, APPROVE_BUTTON, "approval card")
    view = nb7.view(1)
    assert "compute six times seven" in text(view.locator(".mibyan-text").first)
    assert view.get_attribute("data-status") == "awaiting_approval"
    nb7.screenshot("approval-card")

    view.locator(".mibyan-approval button.mibyan-approve").click()

    transcript = nb7.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    assert "42" in tool_results(server), "the approved call's result did not reach the model"
    assert "product is 42" in text(transcript.locator(".mibyan-assistant").last)
    assert nb7.view(1).count() == 0, "the live view stayed after the run ended"
    assert not nb7.error_outputs(1)
    assert not page_errors(nb7), nb7.page_errors
    nb7.screenshot("transcript")


@pytest.mark.timeout(180)
def test_notebook7_stop_ends_a_blocking_tool(nb7: Notebook7, server: FakeProviderServer) -> None:
    server.push(
        FakeReply(
            "Sleeping now.",
            calls=[FakeCall("run_python", {"code": "import time\ntime.sleep(30)"}, id="s1")],
        ),
        FakeReply("Stopped as asked."),
    )
    model = f"fake:m@{server.base_url}"
    cells = [LOAD, f"%%agent --model {model} --tools python --approve auto\nSleep.", "1+1"]
    nb7.open_notebook("stop.ipynb", cells)
    nb7.run_cell(0)
    nb7.start_cell(1)
    running = (
        "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-tool[data-call-id=\"s1\"]')"
    )
    nb7.wait_while_running(1, running, "the sleeping tool's card")
    nb7.screenshot("running-tool")

    clicked = time.monotonic()
    nb7.view(1).locator("button.mibyan-stop").click()
    transcript = nb7.wait_transcript(1, timeout_ms=15_000)
    took = time.monotonic() - clicked
    print(f"Notebook 7: Stop click to transcript {took:.2f} s")
    assert transcript.get_attribute("data-status") == "stopped"
    assert took < 10, f"Stop took {took:.1f} s: it waited for the 30 s sleep"
    assert STOPPED in stored_tool_results(nb7)[0]
    assert not page_errors(nb7), nb7.page_errors
    assert not nb7.error_outputs(1), "Stop must end the cell normally"
    assert nb7.run_cell(2).strip() == "2", "the kernel is not usable after Stop"


@pytest.mark.timeout(120)
def test_notebook7_text_grows_as_it_streams_then_stop(nb7: Notebook7) -> None:
    """``demo-slow`` (the demo model at ~5 chunks/s): the live text is seen growing, then
    Stop ends the run mid-stream and the cell ends normally."""
    cell = "%%agent --model demo-slow --tools none\nTell me a very long story."
    nb7.open_notebook("grow.ipynb", [LOAD, cell])
    nb7.run_cell(0)
    nb7.start_cell(1)
    first = nb7.wait_live_text(1)
    nb7.wait_live_text(1, longer_than=first, timeout_ms=10_000)
    nb7.screenshot("streaming")
    nb7.view(1).locator("button.mibyan-stop").click()
    transcript = nb7.wait_transcript(1, timeout_ms=10_000)
    assert transcript.get_attribute("data-status") == "stopped"
    assert not nb7.error_outputs(1)
    assert not page_errors(nb7), nb7.page_errors


IPYKERNEL6_VENV = Path(__file__).resolve().parents[2] / "build" / "ipykernel-6.31.0-venv"
"""Built by ``make ipykernel6-venvs`` (tests never reach a package registry)."""


def add_ipykernel6_kernel(server: Notebook7Server) -> str:
    """A kernelspec on the server for the ipykernel 6.31 venv; its name."""
    if not (IPYKERNEL6_VENV / ".installed").exists():
        why = f"{IPYKERNEL6_VENV} is missing: `make ipykernel6-venvs` builds it"
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            pytest.fail(why)
        pytest.skip(why)
    spec = Path(server.env["JUPYTER_DATA_DIR"]) / "kernels" / "ipykernel6"
    spec.mkdir(parents=True, exist_ok=True)
    python = str(IPYKERNEL6_VENV / "bin" / "python")
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "ipykernel 6.31", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return "ipykernel6"


@pytest.mark.timeout(120)
def test_notebook7_on_ipykernel6_says_so_and_the_policy_decides(
    nb7: Notebook7, notebook7_server: Notebook7Server, server: FakeProviderServer
) -> None:
    """The fallback mode in a browser: the kernel cannot deliver clicks during a run, so no
    card waits for one; the cell says what is unavailable, once."""
    kernel = add_ipykernel6_kernel(notebook7_server)
    server.push(
        FakeReply("Let me run it.", calls=[FakeCall("run_python", {"code": "print(6 * 7)"})]),
        FakeReply("It was not allowed here."),
    )
    cell = f"%%agent --model fake:m@{server.base_url} --tools python\nWhat is 6 * 7?"
    nb7.open_notebook("ipykernel6.ipynb", [LOAD, cell])
    nb7.page.evaluate(
        "async (name) => { await window.jupyterapp.shell.currentWidget.sessionContext"
        ".changeKernel({ name }); }",
        kernel,
    )
    nb7.wait_kernel_ready()
    nb7.run_cell(0, timeout_ms=60_000)
    transcript = nb7.run_to_transcript(1, timeout_ms=20_000)
    assert transcript.get_attribute("data-status") == "completed"
    shown = nb7.output_text(1)
    assert shown.count("cannot deliver clicks while a cell runs, so here approvals") == 1, shown
    assert "this kernel (ipykernel 6.31.0)" in shown
    assert "denied" in text(transcript.locator(".mibyan-tool").first).lower()
    assert "ipykernel 6.31.0" in tool_results(server)
    assert not page_errors(nb7), nb7.page_errors
    nb7.screenshot("ipykernel6-fallback")
