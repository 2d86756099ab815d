"""The admin policy as a student meets it in JupyterLab: when conversations are reviewable
the live view's header says so, and in exam mode a cell is one red line with the admin's
message. The policy file is root's (the Lab runs as root here) and reaches the kernel the
one way the environment may: ``MIBYAN_POLICY`` adds it (``%env`` before the cell)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from policy_support import policy_folder, write_policy

from .lab_driver import Lab

pytestmark = pytest.mark.browser

REVIEWABLE = """(cell) => {
  const line = cell.node.querySelector('.mibyan-view .mibyan-header .mibyan-reviewable');
  return line ? line.textContent : null;
}"""


@pytest.fixture
def policy_file() -> Iterator[Path]:
    with policy_folder() as path:
        yield path


@pytest.mark.skipif(os.geteuid() != 0, reason="a trusted policy file is root's")
@pytest.mark.timeout(120)
def test_the_header_says_reviewable_and_exam_mode_refuses(lab: Lab, policy_file: Path) -> None:
    write_policy(policy_file, "[review]\nreviewable = true\n")
    lab.open_notebook(
        "policy.ipynb",
        [
            f"%env MIBYAN_POLICY={policy_file}",
            "%load_ext mibyan_jupyter",
            "%%agent --model demo-slow --tools none\nTell me a long story about p-values.",
            "%%agent --model demo --tools none\nhello",
        ],
    )
    lab.run_cell(0)
    lab.run_cell(1)
    lab.start_cell(2)
    line = lab.wait_while_running(2, REVIEWABLE, "the header's reviewable line")
    assert line == "Your instructors can review this conversation (the admin policy says so)"
    lab.screenshot("policy-reviewable-header")
    lab.wait_transcript(2)

    write_policy(policy_file, '[exam]\nenabled = true\nmessage = "Midterm: no AI until 12:00."\n')
    said = lab.run_cell(3)
    assert "exam mode: Midterm: no AI until 12:00." in said, said
    assert "Traceback" not in said
    lab.screenshot("policy-exam-refusal")
