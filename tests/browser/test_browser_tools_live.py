"""run_python in JupyterLab: its card's output grows while the code runs (printed lines and
os.system output, the key in it redacted), Stop ends a blocking ``time.sleep(30)`` within
about a second (the click reaches the kernel over a subshell while the main thread sleeps)
and the run ends "stopped"; Kernel > Interrupt during the same code ends the cell with one
red AgentInterrupted line, and Run All stops there (the next cell never runs)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from mibyan_jupyter.jupyter.kernel_tools.interrupts import INTERRUPTED, STOPPED

from .lab_driver import Lab

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"
SECRET = "sk-browser-live-0123456789abcdef"


def agent_cell(code: str) -> str:
    return (
        f"%%agent --tools python --approve auto\nUse run_python to compute:\n```python\n{code}\n```"
    )


SETUP = f"{LOAD}\nimport os\nos.environ['LIVE_TEST_API_KEY'] = '{SECRET}'"
TICKING = (
    "import os, time\nos.system('echo key=$LIVE_TEST_API_KEY')\n"
    "for i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(0.4)\n"
    "time.sleep(30)"
)
OUTPUT_TEXT = """(cell) => {
  const out = cell.node.querySelector('.mibyan-view .mibyan-tool-output');
  return out ? out.textContent : '';
}"""


def stored_tool_results(lab: Lab) -> list[str]:
    with sqlite3.connect(lab.db_path) as db:
        rows = db.execute("SELECT data FROM messages WHERE role = 'tool' ORDER BY id").fetchall()
    return [str(row[0]) for row in rows]


def live_output(lab: Lab, index: int, needle: str) -> str:
    """Wait while the cell runs until its card's live output contains ``needle``."""
    predicate = (
        f"(cell, arg) => {{ const t = ({OUTPUT_TEXT})(cell); return t.includes(arg) && t; }}"
    )
    return str(lab.wait_while_running(index, predicate, f"live output {needle!r}", arg=needle))


@pytest.mark.timeout(150)
def test_live_output_grows_while_run_python_runs_and_stop_ends_it(lab: Lab) -> None:
    lab.open_notebook("live.ipynb", [SETUP, agent_cell(TICKING), "1 + 1"])
    lab.run_cell(0)
    lab.start_cell(1)
    early = live_output(lab, 1, "tick 1")
    assert "key=[redacted]" in early, early
    assert "tick 7" not in early, "the output must show while the code still runs"
    later = live_output(lab, 1, "tick 4")
    assert len(later) > len(early)
    lab.screenshot("live-output-growing")
    live_output(lab, 1, "tick 7")  # now in time.sleep(30), blocking the kernel's main thread
    stop = lab.view(1).locator("button.mibyan-stop")
    clicked = time.monotonic()
    stop.click()
    transcript = lab.wait_transcript(1, timeout_ms=10_000)
    stop_s = time.monotonic() - clicked
    print(f"Stop ended time.sleep(30) in {stop_s:.2f} s")
    assert stop_s < 2.0, f"Stop took {stop_s:.2f} s to end blocking code"
    assert transcript.get_attribute("data-status") == "stopped"
    assert STOPPED in stored_tool_results(lab)[0]
    assert SECRET not in lab.output_text(1)
    assert not lab.error_outputs(1), "Stop must end the cell normally"
    lab.screenshot("stopped")
    assert lab.run_cell(2).strip() == "2", "the kernel is not usable after Stop"


@pytest.mark.timeout(150)
def test_interrupt_during_run_python_stops_run_all(lab: Lab) -> None:
    lab.open_notebook(
        "interrupt.ipynb", [SETUP, agent_cell(TICKING), "ran_after = 'yes'; ran_after"]
    )
    # ``void``: page.evaluate would await the command's promise, the end of every cell
    lab.page.evaluate(
        "() => { void window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
    )
    live_output(lab, 1, "tick 1")
    lab.page.evaluate(
        "() => { void window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }"
    )
    lab.wait_cell_done(1, timeout_ms=15_000)
    errors = lab.error_outputs(1)
    assert len(errors) == 1, errors
    assert errors[0].startswith("AgentInterrupted"), errors
    kept = stored_tool_results(lab)[-1]  # the result the model sees keeps what was printed
    for expected in (INTERRUPTED, "tick 1", "key=[redacted]"):
        assert expected in kept, kept
    assert "cancelled" not in kept, kept
    assert SECRET not in kept, kept
    lab.screenshot("interrupted")
    time.sleep(1.0)  # Run All would have started the next cell by now
    assert lab.execution_count(2) is None, "Run All went on past the interrupted agent cell"
    assert "yes" not in lab.output_text(2)
