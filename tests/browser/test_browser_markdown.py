"""Markdown as it streams, in JupyterLab: complete blocks rendered (a code block coloured)
while the reply still streams; the saved notebook, reopened without a kernel, shows the code
coloured; Copy puts a block's code on the clipboard, and "Insert as cell below" (the front-end
extension) puts it in a new cell under the agent's cell.

``demo-slow`` echoes the prompt inside its answer at ~30 characters a second, so a prompt of
Markdown gives a reply whose code block completes seconds before the run ends.
"""

from __future__ import annotations

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"
CODE = "import os\nprint(len(os.sep))"
PROMPT = f"Intro\n\n```python\n{CODE}\n```\n\n- one\n- two\n\nEnd"
CELL = f"%%agent --model demo-slow --tools none\n{PROMPT}"

# While the cell runs: the live view has a coloured code block and its text still streams.
LIVE_CODE_JS = """(cell) => {
  const view = cell.node.querySelector('.mibyan-view');
  const keyword = view && view.querySelector('.mibyan-text pre.mibyan-code code span.k');
  if (!keyword) return null;
  const open = view.querySelector('.mibyan-text .mibyan-open');
  return {
    keyword: keyword.textContent,
    color: getComputedStyle(keyword).color,
    code: view.querySelector('.mibyan-text pre.mibyan-code code').textContent,
    raw: view.querySelector('.mibyan-blocks').textContent.includes('```'),
    open: open ? open.textContent : '',
    status: view.dataset.status,
  };
}"""


def grant_clipboard(lab: Lab) -> None:
    lab.page.context.grant_permissions(["clipboard-read", "clipboard-write"])


@pytest.mark.timeout(150)
def test_markdown_renders_while_streaming_and_copy_takes_the_code(lab: Lab) -> None:
    grant_clipboard(lab)
    lab.open_notebook("markdown_live.ipynb", [LOAD, CELL])
    lab.run_cell(0)
    lab.start_cell(1)
    live = lab.wait_while_running(1, LIVE_CODE_JS, "a coloured code block", timeout_ms=40_000)
    lab.screenshot("markdown-streaming")
    assert live["status"] == "running"
    assert live["keyword"] == "import"
    assert live["color"] not in ("rgb(0, 0, 0)", ""), live  # the theme's keyword colour
    assert live["code"] == CODE + "\n"
    assert not live["raw"], "the fence's backticks are shown in a rendered block"

    view = lab.view(1)
    copy = view.locator("pre.mibyan-code button.mibyan-copy").first
    copy.click()
    assert lab.page.evaluate("navigator.clipboard.readText()") == CODE + "\n"
    assert text(copy) in ("Copied", "Copy")  # "Copied", back to "Copy" after 1.5 s
    insert = view.locator("pre.mibyan-code button.mibyan-insert").first
    assert insert.is_visible(), "the extension is installed: Insert as cell below is shown"

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    keyword = transcript.locator("pre.mibyan-code span.k").first
    assert text(keyword) == "import"
    lab.screenshot("markdown-transcript")


@pytest.mark.timeout(150)
def test_saved_notebook_shows_coloured_code_and_inserts_it_as_a_cell(lab: Lab) -> None:
    grant_clipboard(lab)
    lab.open_notebook("markdown_saved.ipynb", [LOAD, CELL])
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"
    lab.save()
    lab.shutdown_kernel()
    saved = lab.read_notebook("markdown_saved.ipynb")
    page = "".join(
        "".join(output.get("data", {}).get("text/html", ""))
        for output in saved["cells"][1]["outputs"]
    )
    assert '<span class="k" style="color:#008000;font-weight:bold">import</span>' in page

    lab.goto("markdown_saved.ipynb", wait_kernel=False)  # reload; nothing is run
    transcript = lab.transcript(1).first
    transcript.wait_for(state="visible", timeout=10_000)
    keyword = transcript.locator("pre.mibyan-code span.k").first
    assert text(keyword) == "import"
    color = keyword.evaluate("(el) => getComputedStyle(el).color")
    assert color == "rgb(0, 128, 0)", f"the saved code is not coloured: {color}"
    lab.screenshot("markdown-saved-reopened")

    # The extension gives the saved block its actions back.
    insert = transcript.locator("pre.mibyan-code button.mibyan-insert").first
    insert.wait_for(state="visible", timeout=10_000)
    before = lab.cell_count()
    insert.click()
    lab.page.wait_for_function(
        "(n) => window.jupyterapp.shell.currentWidget.content.widgets.length > n", arg=before
    )
    source = lab.page.evaluate(
        "window.jupyterapp.shell.currentWidget.content.widgets[2].model.sharedModel.getSource()"
    )
    kind = lab.page.evaluate("window.jupyterapp.shell.currentWidget.content.widgets[2].model.type")
    assert (kind, source) == ("code", CODE + "\n"), "the code is not the new cell below"
    transcript.locator("pre.mibyan-code button", has_text="Copy").first.click()
    assert lab.page.evaluate("navigator.clipboard.readText()") == CODE + "\n"
    lab.screenshot("markdown-inserted")
