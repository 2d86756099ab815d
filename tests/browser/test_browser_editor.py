"""%%agent cells in JupyterLab's editor, and the Agent palette commands.

A ``%%agent`` cell's first line is highlighted as the magic and its options and the body as
Markdown (editorLanguage.ts): the test reads CodeMirror's ``tok-*`` classes, which only that
language adds, so a cell back to plain Python has none. The palette commands insert the cells
they promise, open the sessions panel, and "Agent: stop" stops a run whose own cell is still
executing (it runs ``%agent stop`` on a kernel subshell, editorStop.ts).
"""

from __future__ import annotations

import pytest

from .lab_driver import Lab

pytestmark = pytest.mark.browser


def palette(lab: Lab, label: str) -> None:
    """Run a command through the command palette, as a user would (Ctrl+Shift+C)."""
    lab.page.keyboard.press("Control+Shift+C")
    box = lab.page.locator(".lm-CommandPalette-input")
    box.wait_for(state="visible")
    box.fill(label)
    lab.page.locator(".lm-CommandPalette-item", has_text=label).first.wait_for()
    box.press("Enter")


TOKENS_JS = """(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  return Array.from(cell.node.querySelectorAll('.cm-content .cm-line'), (line) =>
    Array.from(line.querySelectorAll('[class*="tok-"]'), (s) => [s.className, s.textContent]));
}"""


def tokens(lab: Lab, index: int) -> list[list[list[str]]]:
    return list(lab.page.evaluate(TOKENS_JS, index))


@pytest.mark.timeout(150)
def test_agent_palette_commands_and_a_highlighted_agent_cell(lab: Lab) -> None:
    lab.open_notebook(
        "editor.ipynb",
        ["%load_ext mibyan_jupyter", "%%agent --model demo-slow --tools none\nA long story."],
    )
    lab.run_cell(0)

    # The magic line is a keyword + its options; the body is Markdown.
    lab.page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 1")
    palette(lab, "Agent: insert %%agent cell")
    lab.page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.length === 3"
    )
    lab.page.keyboard.type("# Plan\nsay *hi*")
    lab.page.wait_for_function(
        "(i) => document.querySelectorAll('.jp-Cell')[i].querySelector('.tok-heading')", arg=2
    )
    first, second, *_ = tokens(lab, 2)
    assert any("tok-keyword" in c.split() and t == "%%agent" for c, t in first), first
    assert any("tok-heading" in c for c, _ in second), second
    lab.screenshot("highlighted-cell")
    lab.page.evaluate(
        "window.jupyterapp.shell.currentWidget.content.widgets[2].model.sharedModel"
        ".setSource('x = 1  # plain Python')"
    )
    lab.page.wait_for_function(
        "(i) => !document.querySelectorAll('.jp-Cell')[i].querySelector('[class*=\"tok-\"]')",
        arg=2,
    )

    palette(lab, "Agent: new session")
    lab.page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.length === 4"
    )
    active = lab.page.evaluate(
        "window.jupyterapp.shell.currentWidget.content.activeCell.model.sharedModel.getSource()"
    )
    assert active.startswith("%%agent --session new")

    palette(lab, "Agent: open sessions panel")
    lab.page.locator(".mibyan-sp").wait_for(state="visible")

    # Agent: stop reaches the running agent although its cell is still executing.
    lab.start_cell(1)
    lab.wait_live_text(1)
    palette(lab, "Agent: stop")
    transcript = lab.wait_transcript(1, timeout_ms=10_000)
    assert transcript.get_attribute("data-status") == "stopped"
    assert not lab.error_outputs(1)
