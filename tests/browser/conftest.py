"""Browser tests: JupyterLab on 127.0.0.1, driven by Playwright (Python) with Debian Chromium.

One server per test session (starting it costs seconds), one Chromium per test module (see
``chromium``), a fresh page per test. The tests are skipped when Chromium or Playwright is
missing (see lab_driver.py); ``make test`` installs both (tests/browser/ensure_chromium.sh), so
in CI they run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from lab_driver import Lab, LabServer
    from playwright.sync_api import BrowserContext

# lab_driver (and through it Playwright) is imported in the fixtures, not here: when Chromium
# or Playwright is missing, lab_driver skips the test modules, and this file must still load.

ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    from lab_driver import LabServer

    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Chromium with a fresh profile, per test module (launching costs ~1 s).

    Not per session: Playwright's sync API leaves its event loop marked as running in the
    main thread between calls, so while it is open every later asyncio user in this pytest
    process (pytest-asyncio tests, nbclient) fails with "Cannot run the event loop while
    another loop is running". Closing it at the end of each module keeps the rest of the
    suite clean; pytest's "package" scope would only end with the session here.
    """
    from lab_driver import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def lab(
    request: pytest.FixtureRequest, lab_server: LabServer, chromium: BrowserContext
) -> Iterator[Lab]:
    """A new page on the shared server; screenshot and page errors saved after the test."""
    from lab_driver import Lab, artifact_name

    page = chromium.new_page()
    page.set_default_timeout(15_000)
    driver = Lab(page, lab_server)
    name = artifact_name(request.node.name)
    driver.artifact_stem = ARTIFACTS / name
    problems = driver.problems
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console.{message.type}: {message.text}")
            if message.type in ("error", "warning")
            else None
        ),
    )
    try:
        yield driver
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            page.screenshot(path=ARTIFACTS / f"{name}.png")
        except Exception as error:  # a crashed page must not hide the test's own failure
            problems.append(f"screenshot failed: {error}")
        log = "\n".join(["# page errors and console messages", *problems])
        log += "\n\n# end of the server's log\n" + lab_server.log_tail()
        (ARTIFACTS / f"{name}.log").write_text(log + "\n")
        page.close()
        lab_server.shutdown_kernels()
