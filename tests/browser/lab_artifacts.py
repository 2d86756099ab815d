"""What a browser test leaves behind: tests/browser/artifacts/<test>/ with screenshots, the
page's errors and console, and the part of the shared server's log written during the test.

A browser failure is hard to read from an assertion alone; these files show what the page
looked like and what JupyterLab and the server said. The folder is emptied when the test
starts, so what it holds is always from the last run of that test.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module must load without Playwright (lab_driver skips then)
    from playwright.sync_api import ConsoleMessage, Page

ARTIFACTS = Path(__file__).parent / "artifacts"


def artifact_name(name: str) -> str:
    """A file or folder name for a test (parametrized ids made safe)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "test"


class Artifacts:
    """One test's artifacts folder and the page messages recorded for it."""

    def __init__(self, name: str) -> None:
        self.folder = ARTIFACTS / artifact_name(name)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self.page_errors: list[str] = []  # uncaught exceptions in the page
        self.console: list[str] = []  # every console message, "type: text"

    def listen(self, page: Page) -> None:
        """Record the page's errors and console from now on (before it loads JupyterLab, so
        the extensions' activation messages are caught too)."""
        page.on("pageerror", lambda error: self.page_errors.append(f"pageerror: {error}"))
        page.on("console", self._on_console)

    def _on_console(self, message: ConsoleMessage) -> None:
        self.console.append(f"{message.type}: {message.text}")

    def screenshot(self, page: Page, label: str) -> None:
        page.screenshot(path=self.folder / f"{label}.png")

    def save(self, page: Page, server_log: str) -> None:
        """The final screenshot and the logs; a crashed page must not hide the test's failure."""
        try:
            self.screenshot(page, "final")
        except Exception as error:
            self.page_errors.append(f"screenshot failed: {error}")
        page_log = ["# page errors", *self.page_errors, "", "# console", *self.console]
        (self.folder / "page.log").write_text("\n".join(page_log) + "\n")
        (self.folder / "server.log").write_text(server_log)
