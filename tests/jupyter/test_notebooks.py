"""The shipped notebooks run top to bottom headlessly (nbclient, demo model, no key), never
hang on an approval nobody can click, and keep the conversation readable without a kernel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "MIBYAN_APPROVE")

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_DEMO_DELAY", "0.001")
    return tmp_path


def _texts(cell: nbformat.NotebookNode) -> str:
    parts: list[str] = []
    for output in cell.get("outputs", []):
        parts.append(str(output.get("text", "")))
        for value in output.get("data", {}).values():
            parts.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(parts)


def test_there_are_notebooks() -> None:
    assert [n.name for n in NOTEBOOKS][:1] == ["01-quickstart.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_headlessly_to_the_end(path: Path, clean_env: Path) -> None:
    copy = clean_env / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(clean_env)}},
    ).execute()  # raises CellExecutionError if any cell fails
    agent_cells = [c for c in notebook.cells if c.cell_type == "code" and "%%agent" in c.source]
    assert agent_cells
    for cell in agent_cells:
        text = _texts(cell)
        assert "mibyan-transcript" in text, cell.source  # static output, no widget needed
        assert "application/vnd.jupyter.widget-view+json" not in json.dumps(cell.outputs)
    if path.name == "01-quickstart.ipynb":
        everything = "\n".join(_texts(c) for c in agent_cells)
        assert "no one can click" in everything  # the pending approval, decided by the policy
        assert "growth: 190" in everything  # the auto-approved run_python really ran
        assert "demo model" in everything
        assert (clean_env / "quickstart-session.ipynb").exists()


def test_make_demo_command_executes_the_quickstart(clean_env: Path) -> None:
    """What the README's first command runs, with the output it prints: it runs in a work
    folder, so the notebooks' folder gains no executed notebook and no export (which the
    README's second command, the tests, would otherwise count as teaching notebooks)."""
    source = clean_env / "notebooks"
    source.mkdir()
    shutil.copy(ROOT / "notebooks" / "01-quickstart.ipynb", source / "q.ipynb")
    workdir = clean_env / "build" / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibyan_jupyter.quickstart",
            str(source / "q.ipynb"),
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        env=os.environ.copy(),
        cwd=clean_env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Executed" in result.stdout
    assert "growth: 190" in result.stdout
    assert (workdir / "q.executed.ipynb").exists()
    assert (workdir / "quickstart-session.ipynb").exists()  # the notebook's own export cell
    assert sorted(p.name for p in source.iterdir()) == ["q.ipynb"]


def test_demo_refuses_a_work_folder_inside_the_notebooks(tmp_path: Path) -> None:
    from mibyan_jupyter.quickstart import main

    (tmp_path / "n.ipynb").write_text("{}")
    assert main([str(tmp_path / "n.ipynb"), "--workdir", str(tmp_path / "inside")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]
