"""The core imports no I/O or UI library: the ruff banned-api rule (TID251) really fires
for mibyan_jupyter/core/, not elsewhere, and the real core modules import none of them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "mibyan_jupyter" / "core"
BANNED = ("httpx", "sqlite3", "nbformat", "IPython", "ipywidgets")

OFFENDER = """\
import sqlite3

import httpx
import ipywidgets.widgets
from IPython.display import display
from nbformat import v4

__all__ = ["display", "httpx", "ipywidgets", "sqlite3", "v4"]
"""


def _ruff() -> list[str]:
    sibling = Path(sys.executable).with_name("ruff")
    if sibling.exists():
        return [str(sibling)]
    return [sys.executable, "-m", "ruff"]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The lint configuration in the repository's layout: pyproject.toml at the top and
    the core's nested .ruff.toml (which extends it) in mibyan_jupyter/core/."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    core = tmp_path / "mibyan_jupyter" / "core"
    core.mkdir(parents=True)
    shutil.copy(CORE / ".ruff.toml", core / ".ruff.toml")
    (tmp_path / "mibyan_jupyter" / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "offender.py").write_text(OFFENDER)
    outside = tmp_path / "mibyan_jupyter" / "providers"
    outside.mkdir()
    (outside / "__init__.py").write_text("")
    (outside / "offender.py").write_text(OFFENDER)
    return tmp_path


def _check(repo: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_ruff(), "check", "--no-cache", "--output-format", "concise", target],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_banned_imports_fire_in_core(repo_copy: Path) -> None:
    result = _check(repo_copy, "mibyan_jupyter/core/offender.py")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "TID251" in line]
    for module in BANNED:
        assert any(f"`{module}` is banned" in line for line in lines), (
            f"no TID251 for {module}:\n{result.stdout}"
        )
    assert len(lines) == len(BANNED), result.stdout
    assert "the core imports no I/O or UI library" in result.stdout


def test_same_file_outside_core_passes(repo_copy: Path) -> None:
    result = _check(repo_copy, "mibyan_jupyter/providers/offender.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TID251" not in result.stdout


def test_nested_config_keeps_the_root_rules(repo_copy: Path) -> None:
    """The core's .ruff.toml extends the root one: the root's lint rules still apply."""
    (repo_copy / "mibyan_jupyter" / "core" / "unused.py").write_text("import os\n")
    result = _check(repo_copy, "mibyan_jupyter/core/unused.py")
    assert result.returncode == 1
    assert "F401" in result.stdout


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def test_real_core_modules_import_no_banned_library() -> None:
    """Every module of the core, the run machinery in ``core/_run/`` included."""
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    assert any(path.parent.name == "_run" for path in files)
    offenders = {
        str(path.relative_to(CORE)): sorted(
            module for module in _imported_modules(path) if module.split(".")[0] in BANNED
        )
        for path in files
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def test_ast_scan_detects_each_banned_form(tmp_path: Path) -> None:
    """The scanner itself sees every import form it is meant to catch."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        OFFENDER + "import importlib\nimportlib.import_module('httpx')\n__import__('sqlite3')\n"
    )
    modules = _imported_modules(sample)
    assert {m.split(".")[0] for m in modules} >= set(BANNED)


def _imports_with_relative(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` imports, relative imports resolved against
    ``package`` (the dotted package the file is in), also those under TYPE_CHECKING."""
    found = _imported_modules(path)
    base = package.split(".")
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            parent = base[: len(base) - (node.level - 1)]
            module = ".".join([*parent, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).parent.parts)


def test_no_other_package_imports_the_run_machinery() -> None:
    """``core/_run`` is private to the core: the other packages use the core's face."""
    package = ROOT / "mibyan_jupyter"
    files = [path for path in package.rglob("*.py") if CORE not in path.parents]
    assert len(files) > 10
    offenders = {
        str(path.relative_to(package)): sorted(
            module
            for module in _imports_with_relative(path, _package_of(path))
            if module.startswith("mibyan_jupyter.core._run")
        )
        for path in files
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def test_the_facade_helpers_do_not_import_the_agent() -> None:
    """``Agent.chat`` / ``run_conversation`` use these modules; importing the Agent back
    (even for typing) would be an import circle."""
    for name in ("conversation.py", "sync_bridge.py"):
        modules = _imports_with_relative(CORE / name, "mibyan_jupyter.core")
        assert not any(m.startswith("mibyan_jupyter.core.agent") for m in modules), name
