"""Where the server extension sits: nothing imports it, it imports only the layers below it
(docs/architecture.md, "Layers"), its config file names it, and loading it costs a server's
start no store, core or export import (those load on the store's thread)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import mibyan_jupyter
from mibyan_jupyter.server import _jupyter_server_extension_points

from .api_server import CONFIG_PATH

PACKAGE = Path(mibyan_jupyter.__file__).parent
ALLOWED = ("server", "store", "export", "core", "secrets")


def imported(path: Path) -> set[str]:
    """The ``mibyan_jupyter`` modules a file imports (at any depth of its code)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("mibyan_jupyter")}


def test_nothing_imports_the_server_and_it_imports_only_lower_layers() -> None:
    for path in PACKAGE.rglob("*.py"):
        inside = path.is_relative_to(PACKAGE / "server")
        for name in imported(path):
            if inside:
                layer = name.split(".")[1] if "." in name else ""
                assert layer in ALLOWED, f"{path.name} imports {name}"
            else:
                assert not name.startswith("mibyan_jupyter.server"), f"{path} imports {name}"


def test_the_config_file_enables_the_module_that_names_itself() -> None:
    config = json.loads(
        (CONFIG_PATH / "jupyter_server_config.d" / "mibyan_jupyter.json").read_text()
    )
    assert config == {"ServerApp": {"jpserver_extensions": {"mibyan_jupyter.server": True}}}
    assert _jupyter_server_extension_points() == [{"module": "mibyan_jupyter.server"}]


def test_loading_the_extension_imports_no_store_core_or_export() -> None:
    code = (
        "import sys, mibyan_jupyter.server.extension\n"
        "print(sorted(m for m in sys.modules if m.startswith('mibyan_jupyter.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "mibyan_jupyter.server.extension" in loaded
    for layer in ("store", "core", "export", "jupyter"):
        assert f"mibyan_jupyter.{layer}" not in loaded, loaded
