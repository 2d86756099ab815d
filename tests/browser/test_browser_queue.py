"""Queues mapped to cells, end to end: the real front-end extension and the real kernel
side. A second ``%%agent`` cell run on its own while the first one works reaches the running
agent at once as a steering message; the running view shows it queued, the agent answers it
in the same run, and the queued cell, when it finally executes, only says where it went."""

from __future__ import annotations

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"


@pytest.mark.timeout(150)
def test_a_cell_run_while_the_agent_works_steers_it(lab: Lab) -> None:
    lab.open_notebook(
        "queue.ipynb",
        [
            LOAD,
            "%%agent --model demo-slow --tools none\nTell me a long story.",
            "%%agent --tools none\nAlso mention pineapples.",
        ],
    )
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_live_text(1)
    lab.start_cell(2)  # alone: the extension sends it over the queue comm

    label = lab.cell(2).locator(".mibyan-queued-label")
    label.wait_for(state="visible", timeout=10_000)
    assert "steering" in text(label)
    queued = lab.view(1).locator(".mibyan-queued")
    queued.first.wait_for(state="visible", timeout=10_000)
    assert "pineapples" in text(queued.first)
    lab.screenshot("queued")

    transcript = lab.wait_transcript(1, timeout_ms=90_000)
    users = [text(u) for u in transcript.locator(".mibyan-user").all()]
    assert any("pineapples" in u for u in users), users  # answered in the same run
    lab.wait_cell_done(2, timeout_ms=30_000)
    assert lab.output(2).locator(".mibyan-queued-note").count() == 1, lab.output_text(2)
    assert lab.cell(2).locator(".mibyan-queued-label").count() == 0
    assert not lab.error_outputs(1)
    assert not lab.error_outputs(2)
