"""The JupyterLab extension (labextension/) queues a lone ``%%agent`` cell for the running agent.

A ``%%agent`` cell awaits its agent run, so a second one would only wait in the kernel's queue.
The extension opens a comm on ``mibyan_jupyter.queue`` instead, and marks the cell when the
kernel says it took the text. These tests run the built extension in a real JupyterLab and
Chromium against a stand-in for the kernel side: a setup cell registers the comm target (it
records what it got and answers "queued") and an input transformer that turns a ``%%agent``
cell into ``await asyncio.sleep(N)`` — the same top-level await the real magic uses, which is
what lets ipykernel >= 7.4 dispatch the comm while the cell runs.

They use the shared server (it serves the repository's built extension, first on its
labextensions path; the stand-in lives in each test's own kernel, so it touches no other test)
and skip when the extension was not built (labextension/build.sh).
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any

import pytest

from .lab_driver import Lab
from .lab_process import BUILT_LABEXTENSION as BUILT

pytestmark = pytest.mark.browser

ACTIVATED = "mibyan-jupyter queue extension activated"

if not (BUILT / "package.json").exists():
    if os.environ.get("MIBYAN_NO_SKIP") == "1":  # make test built it: missing is a failure
        raise RuntimeError(f"{BUILT} is not built (labextension/build.sh should have built it)")
    pytest.skip(f"{BUILT} is not built (run labextension/build.sh)", allow_module_level=True)

# The kernel side's stand-in. `%%agent` cells sleep for the number in their body (else 0.1 s)
# with a top-level await; the comm target records each request and whether an agent was running.
SETUP = """
import asyncio, json, threading
_ip = get_ipython()
_state = {"running": 0, "opened": [], "closed": [], "executed": []}

async def _fake_agent(source):
    parent = _ip.kernel.get_parent("shell")
    _state["executed"].append({"cell_id": parent["metadata"].get("cellId"), "source": source})
    try:
        seconds = float(source.split("\\n", 1)[1])
    except (IndexError, ValueError):
        seconds = 0.1
    _state["running"] += 1
    try:
        await asyncio.sleep(seconds)
    finally:
        _state["running"] -= 1

def _agent_cells(lines):
    source = "".join(lines)
    return [f"await _fake_agent({source!r})\\n"] if source.lstrip().startswith("%%agent") else lines

def _record(comm, msg):
    main = threading.current_thread() is threading.main_thread()
    _state["opened"].append({"data": msg["content"]["data"], "agent_running": _state["running"] > 0, "main": main})
    comm.on_close(lambda close: _state["closed"].append(threading.current_thread() is threading.main_thread()))

def _answer(comm, msg):
    _record(comm, msg)
    comm.send({"queued": True, "mode": "steer", "reason": "stand-in"})

_ip.input_transformers_cleanup.append(_agent_cells)
_ip.kernel.comm_manager.register_target("mibyan_jupyter.queue", _answer)
"ready"
"""

# Page side: every comm_open / comm_close of the queue comm sent or received, with a timestamp,
# and any request for a kernel subshell (JupyterLab 4.6 moves comms to one unless the comm opts
# out). Other comms (the notebook tools' own, the widgets') are not the queue's: left out.
WATCH_COMMS = """() => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  window.__mibyanComms = [];
  const queue = new Set();
  kernel.anyMessage.connect((_, args) => {
    const type = args.msg.header.msg_type;
    const content = args.msg.content || {};
    if (type === 'comm_open') {
      if (content.target_name !== 'mibyan_jupyter.queue') return;
      queue.add(content.comm_id);
    } else if (type === 'comm_close') {
      if (!queue.has(content.comm_id)) return;
    } else if (type !== 'create_subshell_request') {
      return;
    }
    window.__mibyanComms.push({type: `${args.direction} ${type}`, at: performance.now()});
  });
}"""

QUEUED = """(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  const label = cell.node.querySelector('.mibyan-queued-label');
  return cell.node.classList.contains('mibyan-queued-cell') && label ? label.textContent : null;
}"""


def kernel_state(lab: Lab) -> dict[str, Any]:
    """The stand-in's record, read with a silent request once the kernel is idle."""
    text = lab.page.evaluate(
        """async () => {
          const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
          const reply = await kernel.requestExecute({
            code: '', silent: true, store_history: false,
            user_expressions: {state: 'json.dumps(_state)'}
          }).done;
          return reply.content.user_expressions.state.data['text/plain'];
        }"""
    )
    return dict(json.loads(ast.literal_eval(text)))


def model_id(lab: Lab, index: int) -> str:
    return str(
        lab.page.evaluate(
            "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.id", index
        )
    )


def comms(lab: Lab) -> list[dict[str, Any]]:
    """The messages WATCH_COMMS recorded since it started or since the last call."""
    return list(lab.page.evaluate("() => window.__mibyanComms.splice(0)"))


def run_selected(lab: Lab, first: int, last: int) -> None:
    """Select cells first..last and run them together, like "Run Selected Cells"."""
    lab.page.evaluate(
        """([first, last]) => {
          const notebook = window.jupyterapp.shell.currentWidget.content;
          notebook.activeCellIndex = first;
          notebook.deselectAll();
          notebook.extendContiguousSelectionTo(last);
          void window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        [first, last],
    )


@pytest.mark.timeout(60)
def test_lone_agent_cell_is_queued_for_the_running_agent(lab: Lab) -> None:
    logs = lab.console
    follow = "%%agent\nWhich units are these in?"
    lab.open_notebook("queue.ipynb", [SETUP, "%%agent\n2", follow])
    assert any(ACTIVATED in line for line in logs), logs
    assert lab.page.evaluate("window.jupyterapp.isPluginActivated('mibyan-jupyter:queue')")
    assert lab.run_cell(0).strip() == "'ready'"
    lab.page.evaluate(WATCH_COMMS)

    lab.start_cell(1)
    lab.start_cell(2)
    label = lab.page.wait_for_function(QUEUED, arg=2, timeout=5_000).json_value()

    assert label == "queued for the running agent (steering)"
    assert lab.cell_running(1), "the reply must arrive while the first agent still runs"
    lab.screenshot("queued-cell")
    lab.wait_cell_done(2)
    assert lab.page.evaluate(QUEUED, 2) is None, "the mark must go once the cell executed"
    assert lab.cell(2).locator(".mibyan-queued-label").count() == 0
    assert [c["type"] for c in comms(lab)] == ["send comm_open", "send comm_close"]
    state = kernel_state(lab)
    request = {
        "source": follow,
        "cell_id": model_id(lab, 2),
        "notebook_path": lab.path("queue.ipynb"),
    }
    # Handled on the kernel's main thread (no subshell), while the first agent still ran.
    assert state["opened"] == [{"data": request, "agent_running": True, "main": True}]
    assert state["closed"] == [True], "the front end closes the comm after the reply"
    # The later execute_request carries the same id, so the kernel can tell it was queued.
    assert [run["cell_id"] for run in state["executed"]] == [model_id(lab, 1), model_id(lab, 2)]
    assert not lab.page_errors, lab.page_errors


@pytest.mark.timeout(60)
def test_batches_and_silent_kernels_leave_cells_alone(lab: Lab) -> None:
    unregister = '_ip.kernel.comm_manager.unregister_target("mibyan_jupyter.queue", _answer)'
    mute = '_ip.kernel.comm_manager.register_target("mibyan_jupyter.queue", _record)'
    lab.open_notebook(
        "batch.ipynb",
        [SETUP, "%%agent\n1.5", "%%agent\nB", "%%agent\nC", unregister, mute, "%%agent\n5.5"],
    )
    lab.run_cell(0)
    lab.page.evaluate(WATCH_COMMS)

    # Run Selected Cells while an agent runs: a batch keeps its order, nothing is queued.
    lab.start_cell(1)
    run_selected(lab, 2, 3)
    lab.wait_cell_done(3)
    assert comms(lab) == []

    # No comm target in the kernel: ipykernel closes the comm at once; the cell is not marked.
    lab.run_cell(4)
    lab.start_cell(1)
    lab.start_cell(2)
    lab.page.wait_for_function("() => window.__mibyanComms.length >= 2", timeout=5_000)
    assert lab.cell_running(1)
    assert lab.page.evaluate(QUEUED, 2) is None
    seen = comms(lab)
    assert [c["type"] for c in seen] == ["send comm_open", "recv comm_close"]
    assert seen[1]["at"] - seen[0]["at"] < 2_500, "at once, not after the 5 s timeout"
    lab.wait_cell_done(2)
    assert comms(lab) == []

    # A target that never answers: the front end gives up after 5 s and closes the comm.
    lab.run_cell(5)
    lab.start_cell(6)
    lab.start_cell(2)
    lab.page.wait_for_function("() => window.__mibyanComms.length >= 2", timeout=8_000)
    opened, closed = comms(lab)
    assert (opened["type"], closed["type"]) == ("send comm_open", "send comm_close")
    assert 4_900 <= closed["at"] - opened["at"] <= 7_000
    assert lab.page.evaluate(QUEUED, 2) is None
    lab.wait_cell_done(2)
    state = kernel_state(lab)
    assert [entry["agent_running"] for entry in state["opened"]] == [True], state
    assert state["closed"] == [True], state
    assert not lab.page_errors, lab.page_errors
