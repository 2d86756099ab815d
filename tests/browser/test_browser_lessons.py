"""The notebook-tools lesson (notebooks/06-notebook-tools.ipynb) in JupyterLab, as a student
runs it: its own code cells, the demo model, no key. CI's headless run shows the refusal
(tests/jupyter/lesson_checks.py); this is what the lesson says the browser shows instead:
``list_cells`` lists this notebook's cells at once, and ``insert_cell`` asks, then, after
Approve, adds the lesson's fenced code as a new cell at the end, marked with the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LESSON = Path(__file__).resolve().parents[2] / "notebooks" / "06-notebook-tools.ipynb"
WETTEST = "print(max(rainfall, key=rainfall.get))"
HEADLESS = "headless runs cannot edit the notebook"
LAST_CELL_JS = """() => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const cell = model.cells.get(model.cells.length - 1);
  return {count: model.cells.length, source: cell.sharedModel.getSource(),
          meta: cell.getMetadata('mibyan') ?? null};
}"""


def lesson_code_cells() -> list[str]:
    notebook = nbformat.read(LESSON, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def last_cell(lab: Lab) -> Any:
    return lab.page.evaluate(LAST_CELL_JS)


@pytest.mark.timeout(180)
def test_lesson_06_reads_the_notebook_and_inserts_a_cell_after_approve(lab: Lab) -> None:
    cells = lesson_code_cells()
    listing = next(i for i, source in enumerate(cells) if "Use list_cells" in source)
    insert = next(i for i, source in enumerate(cells) if "Use insert_cell" in source)
    lab.open_notebook("lesson-06.ipynb", cells)
    lab.run_cell(0)  # %load_ext: the extension's notebook comm connects
    connected = ".jp-NotebookPanel:visible[data-mibyan-notebook-tools='connected']"
    lab.page.locator(connected).wait_for(state="attached", timeout=10_000)
    for index in range(1, listing):
        lab.run_cell(index)

    lab.start_cell(listing)
    listed = text(lab.wait_transcript(listing, timeout_ms=30_000))
    assert HEADLESS not in listed, listed[-1500:]
    assert "rainfall = {" in listed  # the cells' sources, read from the notebook itself
    assert last_cell(lab)["count"] == len(cells)

    lab.start_cell(insert)
    card = lab.view(insert).locator(".mibyan-approval[data-pending='true']")
    card.wait_for(state="visible", timeout=20_000)
    assert WETTEST in text(card.locator(".mibyan-approval-args"))
    assert last_cell(lab)["count"] == len(cells), "nothing is inserted before Approve"
    lab.screenshot("lesson-06-insert-card")
    card.locator("button.mibyan-approve").click()
    lab.wait_transcript(insert, timeout_ms=30_000)
    added = last_cell(lab)
    assert added["count"] == len(cells) + 1
    assert added["source"] == WETTEST
    assert added["meta"]["session"]
    lab.screenshot("lesson-06-inserted")
