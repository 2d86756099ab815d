"""The notebook tools (``--tools notebook``) in JupyterLab, the model scripted over loopback:

* the agent inserts a cell and, after Approve, runs it: the notebook shows the new cell with
  the source, its output and an execution count, the metadata names the session and call, and
  the run_cell card showed the code it was about to run;
* an edit's approval card shows a unified diff of the cell's source; Deny leaves the
  notebook exactly as it was.

The kernel is a process of the Lab server, so the fake provider runs here on 127.0.0.1 and
the cells name it as their model. One module, so one JupyterLab and one Chromium.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply
from mibyan_jupyter.testing.scripts import RecordedRequest, ScriptItem

from .lab_driver import Lab, text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LOAD = "%load_ext mibyan_jupyter"
INSERTED = re.compile(r"Inserted cell (\S+) at index (\d+)\.")
NEW_SOURCE = "print('hello from the agent')\n6 * 7"
PENDING = ".mibyan-approval[data-pending='true']"
CELL_JS = """(i) => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const cell = model.cells.get(i);
  return cell ? {id: cell.id, source: cell.sharedModel.getSource(),
                 meta: cell.getMetadata('mibyan') ?? null, count: model.cells.length} : null;
}"""


def tool_messages(request: RecordedRequest) -> dict[str, str]:
    body = request.body
    assert isinstance(body, dict)
    return {m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"}


def run_what_was_inserted(request: RecordedRequest) -> ScriptItem:
    """The model's next step, read from the last tool result: run the inserted cell."""
    results = tool_messages(request)
    if "r1" in results:
        return FakeReply("The cell printed its greeting and 42.")
    found = INSERTED.search(results.get("i1", ""))
    if found is None:
        return FakeReply(f"No cell was inserted: {results}")
    return FakeReply(
        "Now running it.", calls=[FakeCall("run_cell", {"cell_id": found[1]}, id="r1")]
    )


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(fallback=run_what_was_inserted) as fake:
        yield fake


def agent_cell(server: FakeProviderServer, prompt: str) -> str:
    return f"%%agent --model fake:demo@{server.base_url} --tools notebook\n{prompt}"


def cell_state(lab: Lab, index: int) -> Any:
    return lab.page.evaluate(CELL_JS, index)


def load_and_connect(lab: Lab) -> None:
    """Run ``%load_ext`` (cell 0); the extension, refused before it, opens the comm again
    and the kernel side says it listens (the panel's ``data-mibyan-notebook-tools``)."""
    lab.run_cell(0)
    connected = ".jp-NotebookPanel:visible[data-mibyan-notebook-tools='connected']"
    lab.page.locator(connected).wait_for(state="attached", timeout=10_000)


def wait_card(lab: Lab, index: int, tool: str) -> Any:
    card = lab.view(index).locator(f"{PENDING}:has(.mibyan-approval-title code:text-is('{tool}'))")
    try:
        card.wait_for(state="visible", timeout=20_000)
    except Exception as error:
        raise AssertionError(
            f"no {tool} card; the cell shows: {lab.output_text(index)[:1500]!r}"
        ) from error
    return card


@pytest.mark.timeout(180)
def test_the_agent_inserts_a_cell_and_runs_it_after_approve(
    lab: Lab, server: FakeProviderServer
) -> None:
    insert = FakeCall("insert_cell", {"source": NEW_SOURCE, "cell_type": "code"}, id="i1")
    server.push(FakeReply("Adding a cell.", calls=[insert]))
    lab.open_notebook("insert.ipynb", [LOAD, agent_cell(server, "Add a cell and run it.")])
    load_and_connect(lab)
    lab.start_cell(1)
    card = wait_card(lab, 1, "insert_cell")
    assert "hello from the agent" in text(card.locator(".mibyan-approval-args"))
    assert cell_state(lab, 2) is None, "nothing is inserted before Approve"
    lab.screenshot("insert-card")
    card.locator("button.mibyan-approve").click()
    run_card = wait_card(lab, 1, "run_cell")
    inserted = cell_state(lab, 2)
    assert inserted["source"] == NEW_SOURCE
    assert inserted["meta"]["message"] == "i1"
    session = inserted["meta"]["session"]
    assert session
    risk = text(run_card.locator(".mibyan-risk"))
    assert f"Runs cell {inserted['id']} in your kernel" in risk
    assert "hello from the agent" in risk  # the card shows the code the id stands for
    lab.screenshot("run-card")
    run_card.locator("button.mibyan-approve").click()
    lab.wait_transcript(1, timeout_ms=30_000)
    output = lab.output_text(2)
    assert "hello from the agent" in output
    assert "42" in output
    assert lab.execution_count(2) == lab.execution_count(1), "marked: ran during the agent's cell"
    ran = cell_state(lab, 2)
    assert ran["meta"] == {"session": session, "message": "r1", "ran": True}
    assert "The cell printed its greeting" in lab.output_text(1)
    lab.screenshot("inserted-and-ran")
    lab.save()
    saved = lab.read_notebook("insert.ipynb")["cells"][2]
    assert saved["metadata"]["mibyan"]["session"] == session
    assert "hello from the agent" in str(saved["outputs"])


@pytest.mark.timeout(180)
def test_an_edit_card_shows_a_diff_and_deny_leaves_the_notebook_unchanged(
    lab: Lab, server: FakeProviderServer
) -> None:
    original = "x = 1\nprint('x is', x)"
    lab.open_notebook("edit.ipynb", [LOAD, original, agent_cell(server, "Make x two.")])
    target = cell_state(lab, 1)
    edit = {"cell_id": target["id"], "source": "x = 2\nprint('x is', x)"}
    server.push(
        FakeReply("Changing x.", calls=[FakeCall("replace_cell_source", edit, id="e1")]),
        FakeReply("Left it as it is."),
    )
    load_and_connect(lab)
    lab.start_cell(2)
    card = wait_card(lab, 2, "replace_cell_source")
    risk = text(card.locator(".mibyan-risk"))
    assert f"--- {target['id']} (now)" in risk
    assert "-x = 1" in risk
    assert "+x = 2" in risk
    assert " print('x is', x)" in risk  # an unchanged context line
    lab.screenshot("edit-diff-card")
    card.locator("button.mibyan-deny").click()
    lab.wait_transcript(2, timeout_ms=30_000)
    after = cell_state(lab, 1)
    assert after["source"] == original
    assert after["meta"] is None
    assert after["count"] == 3
    assert "denied" in tool_messages(server.requests[-1])["e1"]
    lab.screenshot("edit-denied")
