"""The wheel's build step for the front-end extension (hatch-jupyter-builder calls it).

The built extension (``mibyan_jupyter/labextension/``) is git-ignored, so a wheel built from
a clean checkout (``pip install git+...``, ``python -m build``, Binder's ``pip install .``)
carried none until this hook ran ``labextension/build.sh`` itself. pyproject.toml's
``[tool.hatch.build.hooks.jupyter-builder]`` names this function; it runs build.sh with the
``jlpm`` and ``jupyter-builder`` of the build environment (the ``jupyter-builder`` build
requirement: JupyterLab itself is not needed to build). build.sh keeps its stamps, so a later
``make labextension`` does not build again.

Not built here, on purpose:

- when the built extension is already there (``skip-if-exists`` in pyproject.toml): a wheel
  built from the sdist, which carries it, needs no Node.js;
- in an editable install (``pip install -e .``, what ``make demo`` and ``make test`` do):
  there ``make labextension`` builds it and ``jupyter-builder develop`` links it, so setting
  up the venv needs neither Node.js nor the npm registry.

Standard library only: it runs inside the isolated build environment.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _tool_dir() -> Path:
    """The folder holding the build environment's ``jlpm`` and ``jupyter-builder``.

    pip's isolated builds put their scripts on PATH but not beside ``sys.executable``;
    ``python -m build`` makes a venv where they sit beside it. Both are tried.
    """
    found = shutil.which("jlpm")
    candidates = [Path(found).parent] if found else []
    candidates.append(Path(sys.executable).parent)
    for folder in candidates:
        if (folder / "jlpm").exists() and (folder / "jupyter-builder").exists():
            return folder
    raise RuntimeError(
        "building the JupyterLab extension needs jlpm and jupyter-builder (the "
        "jupyter-builder package, a build requirement in pyproject.toml); not found on PATH "
        f"or in {Path(sys.executable).parent}"
    )


def build_labextension(target_name: str, version: str, **_: Any) -> None:
    """Build the extension into ``mibyan_jupyter/labextension`` unless ``version`` is
    "editable" (see the module docstring for why)."""
    if version == "editable":
        print(
            "mibyan-jupyter: editable install, the JupyterLab extension is not built here "
            "(make labextension builds and links it)",
            file=sys.stderr,
        )
        return
    print(f"mibyan-jupyter: building the JupyterLab extension for the {target_name}")
    subprocess.run(["bash", str(_HERE / "build.sh"), str(_tool_dir())], check=True)
