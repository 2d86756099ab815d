"""A ``%%agent`` cell in JupyterLab: the answer streams into the view, the transcript stays;
Stop ends the run mid-stream, the cell ends normally and the kernel stays usable.

``demo-slow`` (the demo model at ~5 chunks/s) gives the browser time to see the text grow
and to press Stop before the answer is complete.
"""

from __future__ import annotations

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"


@pytest.mark.timeout(120)
def test_agent_answer_streams_in_then_stays_as_transcript(lab: Lab) -> None:
    prompt = "Tell me how streaming works, slowly."
    lab.open_notebook("stream.ipynb", [LOAD, f"%%agent --model demo-slow --tools none\n{prompt}"])
    lab.run_cell(0)

    lab.start_cell(1)
    first = lab.wait_live_text(1)
    view = lab.view(1)
    assert view.get_attribute("data-status") == "running"
    assert "demo model" in text(view.locator(".mibyan-demo-badge"))
    lab.wait_live_text(1, longer_than=first, timeout_ms=10_000)
    lab.screenshot("streaming")

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    assert prompt in text(transcript.locator(".mibyan-user"))
    answer = text(transcript.locator(".mibyan-assistant").last)
    assert prompt in answer, f"the demo's echo of the prompt is missing: {answer!r}"
    assert lab.view(1).count() == 0, "the live view stayed after the run ended"
    assert not lab.error_outputs(1)


@pytest.mark.timeout(120)
def test_stop_mid_stream_ends_the_cell_and_keeps_the_kernel(lab: Lab) -> None:
    lab.open_notebook(
        "stop.ipynb",
        [LOAD, "%%agent --model demo-slow --tools none\nTell me a very long story.", "1+1"],
    )
    lab.run_cell(0)

    lab.start_cell(1)
    lab.wait_live_text(1)
    stop = lab.view(1).locator("button.mibyan-stop")
    stop.click()

    transcript = lab.wait_transcript(1, timeout_ms=10_000)
    assert not lab.cell_running(1)
    assert transcript.get_attribute("data-status") == "stopped"
    assert not lab.error_outputs(1), "Stop must end the cell normally, not with an error"
    assert lab.run_cell(2).strip() == "2", "the kernel is not usable after Stop"
