"""Browser tests: JupyterLab on 127.0.0.1, driven by Playwright (Python) with Debian Chromium.

Run them in a pytest process of their own: ``pytest -m browser tests/browser`` (every test here
is marked ``browser``; the rest of the suite runs with ``-m "not browser"``). Playwright's sync
API leaves its event loop marked as running in the main thread while the browser is open, so
every asyncio user in the same process (pytest-asyncio tests, nbclient) would fail with "Cannot
run the event loop while another loop is running". In their own process nothing else runs, so
one JupyterLab server and one Chromium serve all the browser tests (starting them costs
seconds each); each test gets a fresh browser context and page, its own folder on the server
(notebooks, files and a session store of its own, see lab_process.py), its own kernels (all
shut down after it) and its own artifacts folder (lab_artifacts.py).

The shared server and browser are "package"-scoped (this folder is a package), which for a
browser-only run is the whole session; in a mixed run pytest closes them as soon as it leaves
this folder, so the asyncio tests after it still work there too, merely without the split.

The tests are skipped when Chromium or Playwright is missing (see lab_driver.py); ``make test``
installs both (tests/browser/ensure_chromium.sh), so in CI they run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    from .lab_driver import Lab, LabServer

# lab_driver (and through it Playwright) is imported in the fixtures, not here: when Chromium
# or Playwright is missing, lab_driver skips the test modules, and this file must still load.


@pytest.fixture(scope="package")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """The one JupyterLab of the run, serving the repository's built extension if built."""
    from .lab_process import BUILT_LABEXTENSION, LabServer

    built = BUILT_LABEXTENSION if (BUILT_LABEXTENSION / "package.json").exists() else None
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"), labextension=built)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def chromium() -> Iterator[Browser]:
    """The one Chromium of the run (each test opens its own context in it, see ``lab``)."""
    from playwright.sync_api import sync_playwright

    from .lab_driver import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def lab(request: pytest.FixtureRequest, lab_server: LabServer, chromium: Browser) -> Iterator[Lab]:
    """A fresh context and page on the shared server, working in the test's own folder;
    screenshot and logs saved to artifacts/<test>/ after the test, its kernels shut down."""
    from .lab_artifacts import Artifacts, artifact_name
    from .lab_driver import Lab

    if request.node.get_closest_marker("browser") is None:
        pytest.fail(
            "mark this module `pytestmark = pytest.mark.browser`: browser tests must run in "
            "their own pytest process (see tests/browser/conftest.py)"
        )
    name = artifact_name(f"{Path(request.node.path).stem}.{request.node.name}")
    artifacts = Artifacts(name)
    lab_server.new_folder(name)
    log_start = lab_server.log_size()
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    artifacts.listen(page)
    try:
        yield Lab(page, lab_server, name, artifacts)
    finally:
        artifacts.save(page, lab_server.log_since(log_start))
        context.close()
        lab_server.shutdown_kernels()
