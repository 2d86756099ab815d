"""JupyterLab's server for the browser tests: isolated, keyless, on 127.0.0.1.

The server and its kernels get their own HOME, Jupyter and IPython folders and session store,
and no provider key, so the kernel answers with the built-in demo model and nothing of the
machine's setup (settings, workspaces, keys, sessions) leaks into the tests or out of them.
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
SERVER_START_TIMEOUT_S = 60.0


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
    env = {name: value for name, value in os.environ.items() if not _is_provider_key(name)}
    env.update({name: str(path) for name, path in dirs.items()})
    env["MIBYAN_DB"] = str(base / "sessions.sqlite3")
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LabServer:
    """``jupyter lab`` on 127.0.0.1 with a token and a temporary root folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root_dir = base / "root"
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.env = server_env(base)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = base / "jupyter-lab.log"
        self._proc: subprocess.Popen[bytes] | None = None

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

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

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
        """Shut every kernel down, so one test's kernel does not linger into the next."""
        for kernel in self.api("GET", "/api/kernels") or []:
            try:
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
            except urllib.error.HTTPError as error:
                if error.code != 404:  # already gone
                    raise

    def write_notebook(self, name: str, cells: Sequence[str]) -> Path:
        """A notebook of code cells (plain nbformat v4 JSON) in the server's root folder."""
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
