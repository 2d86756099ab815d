"""The shipped notebooks run top to bottom headlessly (nbclient, demo model, no key), never
hang on an approval nobody can click, keep the conversation readable without a kernel, and
show what each lesson teaches: every lesson has its own checks on the outputs its cells
print (tests/jupyter/lesson_checks.py), so a lesson whose point stopped working fails here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from lesson_checks import CHECKS, texts
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TEACHING = ROOT / "notebooks"
NOTEBOOKS = sorted(
    p for p in TEACHING.glob("[0-9][0-9]-*.ipynb") if ".executed" not in p.name
)  # never an executed copy (make demo writes those to build/demo, but one may be left here)
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "MIBYAN_APPROVE")

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "memory"))
    monkeypatch.setenv("MIBYAN_DEMO_DELAY", "0.001")
    return tmp_path


def test_the_teaching_notebooks_are_the_lessons() -> None:
    """One check per lesson, no more, no fewer (a new notebook needs its checks), and the
    saved lessons carry no outputs, so what students open is what the lesson says."""
    assert [n.name for n in NOTEBOOKS] == sorted(CHECKS)
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), path.name
        prose = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
        assert "## Exercise" in prose, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_headlessly_to_the_end(path: Path, clean_env: Path) -> None:
    copy = clean_env / path.name
    shutil.copy(path, copy)
    before = sorted(p.name for p in TEACHING.iterdir())
    notebook = nbformat.read(copy, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(clean_env)}},
    ).execute()  # raises CellExecutionError if any cell fails
    print(f"{path.name}: executed in {time.perf_counter() - started:.1f} s")
    agent_cells = [c for c in notebook.cells if c.cell_type == "code" and "%%agent" in c.source]
    for cell in agent_cells:
        text = texts(cell)
        assert "mibyan-transcript" in text, cell.source  # static output, no widget needed
        assert "application/vnd.jupyter.widget-view+json" not in json.dumps(cell.outputs)
    CHECKS[path.name](notebook, clean_env)
    assert sorted(p.name for p in TEACHING.iterdir()) == before  # nothing written beside it


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
