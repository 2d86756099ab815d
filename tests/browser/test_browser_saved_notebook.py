"""The saved notebook shows the conversation with no kernel and no widget state: the live
view is replaced by a static transcript before the cell ends, and that is what is saved.
"""

from __future__ import annotations

import uuid

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.mark.timeout(120)
def test_saved_notebook_reopened_without_running_shows_the_conversation(lab: Lab) -> None:
    word = f"saved-{uuid.uuid4().hex[:8]}"
    lab.open_notebook("saved.ipynb", [LOAD, f"%%agent --tools none\nPlease repeat {word}."])
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"
    lab.save()
    lab.shutdown_kernel()

    saved = lab.read_notebook("saved.ipynb")
    bundles = [output.get("data", {}) for output in saved["cells"][1]["outputs"]]
    assert any("mibyan-transcript" in "".join(b.get("text/html", "")) for b in bundles), (
        f"the saved cell has no static transcript: {[sorted(b) for b in bundles]}"
    )
    assert not any(WIDGET in b for b in bundles), "a widget output was saved (needs a kernel)"

    lab.goto("saved.ipynb", wait_kernel=False)  # reload; nothing is run

    transcript = lab.transcript(1).first
    transcript.wait_for(state="visible", timeout=10_000)
    assert word in text(transcript.locator(".mibyan-user"))
    answer = text(transcript.locator(".mibyan-assistant").last)
    assert word in answer, f"the saved answer is missing its text: {answer!r}"
    assert lab.view(1).count() == 0, "a live view (needing a kernel) was saved"
    assert lab.execution_count(1) is not None
