"""What each teaching notebook must show when it runs headlessly (tests/jupyter/test_notebooks.py).

One function per lesson, named in :data:`CHECKS` by the notebook's file name. Each finds its
cells by a piece of their source (exactly one cell must match, so an edited lesson fails
loudly instead of checking the wrong cell) and asserts on the outputs that carry the
lesson's point: what ran, what was denied and why, which session a cell went to. Where
the point needs a click or a front end, the check asserts the documented headless
behaviour (docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import nbformat

Check = Callable[[nbformat.NotebookNode, Path], None]
HEADLESS_DENIAL = "no one can click Approve: the notebook runs without a front end"
SESSION = re.compile(r"session ([0-9a-f]{12})\*")


def texts(cell: nbformat.NotebookNode) -> str:
    """Every text a cell's outputs hold (streams, each MIME type's data), joined."""
    parts: list[str] = []
    for output in cell.get("outputs", []):
        parts.append(str(output.get("text", "")))
        if output.get("output_type") == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        for value in output.get("data", {}).values():
            parts.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(parts)


def out(notebook: nbformat.NotebookNode, fragment: str) -> str:
    """The outputs of the one code cell whose source contains ``fragment``."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and fragment in c.source]
    assert len(cells) == 1, f"{len(cells)} cells contain {fragment!r}"
    return texts(cells[0])


def session_of(text: str) -> str:
    """The session id a transcript's footer names (the last footer of the cell)."""
    found = SESSION.findall(text)
    assert found, text[-500:]
    return str(found[-1])


def quickstart(notebook: nbformat.NotebookNode, work: Path) -> None:
    agent_cells = [c for c in notebook.cells if c.cell_type == "code" and "%%agent" in c.source]
    everything = "\n".join(texts(c) for c in agent_cells)
    assert "no one can click" in everything  # the pending approval, decided by the policy
    assert "growth: 190" in everything  # the auto-approved run_python really ran
    assert "demo model" in everything
    assert (work / "quickstart-session.ipynb").exists()


def tools_and_approval(notebook: nbformat.NotebookNode, work: Path) -> None:
    listed = out(notebook, "Use list_variables")
    assert "2 variables" in listed
    assert "temperatures: list, len 5" in listed
    described = out(notebook, "Use describe_variable")
    assert '{"name": "temperatures"}' in described
    assert "17.25" in described
    asked = out(notebook, "%%agent --tools python\nUse run_python to find")
    assert HEADLESS_DENIAL in asked
    assert "warmest: 17.25" not in asked
    assert "warmest: 17.25" in out(notebook, "--tools python --approve auto")
    denied = out(notebook, "--approve deny")
    assert "run_python needs approval" in denied
    assert "no one can be asked" in denied
    assert "[12.5, 14.0, 9.5, 17.25, 15.0]" in out(notebook, "print(temperatures)")
    assert "always (saved)" in out(notebook, "%agent policy set run_python allow")
    ruled = out(notebook, "count the days")
    assert "days: 5" in ruled
    assert "denied" not in ruled
    assert "(none)" in out(notebook, "%agent policy reset")


def budgets_stop_and_steering(notebook: nbformat.NotebookNode, work: Path) -> None:
    one = out(notebook, "--max-turns 1")
    assert "total: 29" in one  # the tool ran within the one turn
    assert "Budget reached: turns (1 of 1)" in one
    assert "budget exhausted" in one
    five = out(notebook, "--max-turns 5")
    assert "total: 29" in five
    assert "· completed ·" in five
    assert "Budget reached" not in five
    slow = out(notebook, "--model demo-slow")
    assert "demo-slow (demo model)" in slow
    assert "· completed ·" in slow
    assert "No agent is running." in out(notebook, "%agent stop")
    steered = out(notebook, "agent.steer(")
    assert "You told me while I was working: **Stop there" in steered
    assert "`count_words` returned: 6" in steered
    roles = [line.split()[0] for line in out(notebook, "for message in agent.state").splitlines()]
    assert [r for r in roles if r] == ["user", "assistant", "tool", "user", "assistant"]
    assert "end reason: aborted" in out(notebook, "story_agent.abort")


def sessions(notebook: nbformat.NotebookNode, work: Path) -> None:
    first = session_of(out(notebook, "My name is Ada"))
    assert session_of(out(notebook, "What did I tell you")) == first  # one conversation
    assert re.search(r"messages\s+4\b", out(notebook, "%agent status"))
    assert "My name is Ada" in out(notebook, "%agent sessions --search Ada")
    forked = out(notebook, "%agent fork current --at 2")
    assert "Forked current at message 2" in forked
    shown = [
        c for c in notebook.cells if c.cell_type == "code" and c.source == "%agent resume last"
    ]
    assert len(shown) == 2
    assert f"Resumed session {first[:8]} (4 messages)" in texts(shown[0])
    assert "(2 messages)" in texts(shown[1])  # the fork: two copied messages
    fork = session_of(texts(shown[1]))
    assert fork != first
    assert session_of(out(notebook, "goes to the fork only")) == fork
    assert "Wrote fork.md (4 messages, Markdown)" in out(notebook, "%agent export current fork.md")
    markdown = (work / "fork.md").read_text()
    assert "This message goes to the fork only." in markdown
    assert "My name is Ada" in markdown
    assert (work / "fork.ipynb").exists()
    assert "'markdown'" in out(notebook, "nbformat.read")
    assert f"Deleted session {fork[:8]}" in out(notebook, "%agent delete")
    tables = [c for c in notebook.cells if c.cell_type == "code" and c.source == "%agent sessions"]
    assert first[:8] in texts(tables[-1])
    assert fork[:8] not in texts(tables[-1])


def inside_the_loop(notebook: nbformat.NotebookNode, work: Path) -> None:
    spec = out(notebook, "@tool(side_effects=False)")
    assert "'celsius': {'description': 'The temperature in degrees Celsius.'" in spec
    assert "21 °C is 69.8 °F." in out(notebook, "How warm is 21")
    events = out(notebook, "updates = 0").splitlines()
    assert events[0].strip() == "agent_start"
    assert events[-2].strip() == "agent_end"
    assert "tool_execution_start to_fahrenheit" in events
    assert int(events[-1].split(":")[1]) > 0  # streamed message_update events
    assert "tool      69.8" in out(notebook, "model.requests[1]")
    failed = out(notebook, "very warm")
    assert "error: True" in failed
    assert "Invalid arguments for to_fahrenheit" in failed
    conversation = out(notebook, "arun_conversation")
    assert "['messages', 'metadata', 'usage']" in conversation
    assert "tool 212.0" in conversation
    assert "end reason: completed" in conversation
    assert "`to_fahrenheit` returned: 36.5" in out(notebook, "Please use to_fahrenheit")


def notebook_tools(notebook: nbformat.NotebookNode, work: Path) -> None:
    from mibyan_jupyter.jupyter.kernel_tools.notebook_comm import HEADLESS

    listed = out(notebook, "Use list_cells")
    assert HEADLESS in listed
    assert "`list_cells` failed" in listed
    inserted = out(notebook, "Use insert_cell")
    assert '"source": "print(max(rainfall, key=rainfall.get))"' in inserted  # the fence
    assert "insert_cell needs approval" in inserted
    assert HEADLESS_DENIAL in inserted
    source = nbformat.read(work / "06-notebook-tools.ipynb", as_version=4)
    assert len(notebook.cells) == len(source.cells)  # headless: the notebook is unchanged


CHECKS: dict[str, Check] = {
    "01-quickstart.ipynb": quickstart,
    "02-tools-and-approval.ipynb": tools_and_approval,
    "03-budgets-stop-and-steering.ipynb": budgets_stop_and_steering,
    "04-sessions-resume-fork-export.ipynb": sessions,
    "05-inside-the-loop.ipynb": inside_the_loop,
    "06-notebook-tools.ipynb": notebook_tools,
}
