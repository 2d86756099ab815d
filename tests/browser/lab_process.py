"""JupyterLab's server for the browser tests: isolated, keyless, on 127.0.0.1, shared by all.

One server serves every browser test of a run (starting it costs seconds). The server and its
kernels get their own HOME, Jupyter and IPython folders and no provider key, so the kernel
answers with the built-in demo model and nothing of the machine's setup (settings, workspaces,
keys, sessions) leaks into the tests or out of them. Each test gets its own folder under the
server's root (:meth:`LabServer.new_folder`); a kernel starts in its notebook's folder, and an
IPython startup file points ``MIBYAN_DB`` there, so every test has a session store of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The server runs from the interpreter running pytest: its venv has jupyterlab, the kernel and
# mibyan_jupyter, and its share/jupyter holds the ipywidgets and anywidget front ends.
VENV_BIN = Path(sys.executable).parent
# The front-end extension as labextension/build.sh leaves it (git-ignored, so maybe missing).
BUILT_LABEXTENSION = Path(__file__).resolve().parents[2] / "mibyan_jupyter" / "labextension"
SERVER_START_TIMEOUT_S = 60.0
STORE_FILE = "sessions.sqlite3"

# Runs in every kernel before its first cell. The kernel's working folder is its notebook's,
# which is the test's own folder, so the store there is the test's alone (a kernel restart
# keeps the folder, hence the store: a resumed session is still found).
_STORE_PER_FOLDER = f"""\
# Written by tests/browser/lab_process.py: one session store per test folder.
import os
os.environ["MIBYAN_DB"] = os.path.join(os.getcwd(), {STORE_FILE!r})
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _is_provider_key(name: str) -> bool:
    return name.endswith("_API_KEY") or name in {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
    }


def server_env(base: Path) -> dict[str, str]:
    """An isolated environment for the server and its kernels, with no provider key, so the
    kernel falls back to the built-in demo model and nothing of the user's setup leaks in."""
    dirs = {
        "HOME": base / "home",
        "IPYTHONDIR": base / "ipython",
        "JUPYTER_CONFIG_DIR": base / "jupyter-config",
        "JUPYTER_DATA_DIR": base / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": base / "jupyter-runtime",
        "JUPYTERLAB_SETTINGS_DIR": base / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": base / "lab-workspaces",
        "TMPDIR": base / "tmp",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    # No "news" toast on top of the first cell's output.
    notification = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True, exist_ok=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    startup = dirs["IPYTHONDIR"] / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-store-per-test-folder.py").write_text(_STORE_PER_FOLDER)
    env = {name: value for name, value in os.environ.items() if not _is_provider_key(name)}
    env.update({name: str(path) for name, path in dirs.items()})
    # For a kernel started outside a test folder; the startup file overrides it in the kernels.
    env["MIBYAN_DB"] = str(base / STORE_FILE)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    # The sessions API: the config file the wheel installs, read from the repository (the
    # editable dev install does not put it in the environment's etc/jupyter).
    env["JUPYTER_CONFIG_PATH"] = str(Path(__file__).resolve().parents[2] / "jupyter-config")
    return env


class LabServer:
    """``jupyter lab`` on 127.0.0.1 with a token and a temporary root folder."""

    def __init__(self, base: Path, *, labextension: Path | None = None) -> None:
        self.base = base
        self.root_dir = base / "root"
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.env = server_env(base)
        if labextension is not None:
            self._link_labextension(labextension)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = base / "jupyter-lab.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def _link_labextension(self, built: Path) -> None:
        """Serve the repository's built extension, first on the server's labextensions path
        (ahead of whatever copy the venv has), so the tests run what labextension/ builds."""
        labextensions = Path(self.env["JUPYTER_DATA_DIR"]) / "labextensions"
        labextensions.mkdir(parents=True, exist_ok=True)
        (labextensions / "mibyan-jupyter").symlink_to(built, target_is_directory=True)

    def start(self) -> None:
        command = [
            str(VENV_BIN / "jupyter"),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--allow-root",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.port_retries=0",
        ]
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.root_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{self.log_tail()}")
            if self._answers_status():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer /api/status:\n{self.log_tail()}")

    def _answers_status(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.url}/api/status?token={self.token}", timeout=2
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()  # SIGTERM: the server shuts its kernels down
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    # -- the log, per test ---------------------------------------------------------------------

    def log_size(self) -> int:
        """Where the log ends now: a test keeps this to save only its own part of the log."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except OSError:
            return "(no log)"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_since(0).splitlines()[-lines:])

    # -- REST API ------------------------------------------------------------------------------

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """End every session and kernel, so one test's kernel does not linger into the next."""
        for kind in ("sessions", "kernels"):  # a session's end shuts its kernel down
            for item in self.api("GET", f"/api/{kind}") or []:
                try:
                    self.api("DELETE", f"/api/{kind}/{item['id']}")
                except urllib.error.HTTPError as error:
                    if error.code != 404:  # already gone
                        raise

    # -- files ---------------------------------------------------------------------------------

    def new_folder(self, name: str) -> Path:
        """A test's own folder under the root (its notebooks, files and session store)."""
        folder = self.root_dir / name
        folder.mkdir()
        return folder

    def write_notebook(self, name: str, cells: Sequence[str]) -> Path:
        """A notebook of code cells (plain nbformat v4 JSON); ``name`` is relative to the root."""
        notebook = {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "id": f"cell-{index}",
                    "metadata": {},
                    "outputs": [],
                    "source": source,
                }
                for index, source in enumerate(cells)
            ],
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        path = self.root_dir / name
        path.write_text(json.dumps(notebook, indent=1))
        return path

    def read_notebook(self, name: str) -> dict[str, Any]:
        return dict(json.loads((self.root_dir / name).read_text()))
