"""The harness itself: a notebook runs in JupyterLab, and widget front ends load.

If these fail, every other browser test would fail for reasons that have nothing to do with
mibyan_jupyter; they say so first. The widget checks matter because the live view is an
anywidget: the server's isolated JUPYTER_DATA_DIR must not hide the venv's labextensions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mibyan_jupyter

from .lab_driver import Lab

pytestmark = pytest.mark.browser

ANYWIDGET_CELL = '''
import anywidget, traitlets

class Probe(anywidget.AnyWidget):
    _esm = """
    function render({ model, el }) {
      const div = document.createElement("div");
      div.className = "probe-anywidget";
      div.textContent = "anywidget says " + model.get("word");
      el.appendChild(div);
    }
    export default { render };
    """
    word = traitlets.Unicode("hello").tag(sync=True)

Probe()
'''


@pytest.mark.timeout(120)
def test_notebook_runs_a_cell(lab: Lab) -> None:
    lab.open_notebook("smoke.ipynb", ["1+1"])

    text = lab.run_cell(0)

    assert text.strip() == "2", f"expected the output 2, got {text!r}"
    assert lab.execution_count(0) == 1


@pytest.mark.timeout(120)
def test_widget_front_ends_load(lab: Lab) -> None:
    lab.open_notebook(
        "widgets.ipynb",
        ["import ipywidgets\nipywidgets.Button(description='Press me')", ANYWIDGET_CELL],
    )

    lab.run_cell(0)
    lab.run_cell(1)

    button = lab.output(0).locator("button.jupyter-button")
    button.wait_for(state="visible")
    assert button.inner_text() == "Press me"
    probe = lab.output(1).locator(".probe-anywidget")
    probe.wait_for(state="visible")
    assert probe.inner_text() == "anywidget says hello"
    assert not lab.error_outputs(1)


@pytest.mark.timeout(120)
def test_kernel_imports_the_package_under_test(lab: Lab) -> None:
    """The server and its kernels inherit this process's environment (PYTHONPATH included),
    so a kernel runs the mibyan_jupyter these tests import, not some other installed copy."""
    lab.open_notebook("where.ipynb", ["import mibyan_jupyter\nprint(mibyan_jupyter.__file__)"])

    shown = lab.run_cell(0).strip()

    assert Path(shown).resolve() == Path(mibyan_jupyter.__file__).resolve(), shown
