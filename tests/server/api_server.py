"""A real ``jupyter server`` on 127.0.0.1 with a token, for the sessions API's tests.

The server finds the extension the way an installed wheel makes it find it: through
``jupyter-config/jupyter_server_config.d/mibyan_jupyter.json`` (the file the wheel installs
into ``etc/jupyter``), put on ``JUPYTER_CONFIG_PATH``; nothing on the command line enables
it. The other server extensions of the venv (JupyterLab, Notebook, ...) are switched off
on the command line so a start takes ~2 s; the panel's tests run the API inside JupyterLab.
HOME, the Jupyter folders and ``MIBYAN_DB`` are the test's own.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
CONFIG_PATH = REPO / "jupyter-config"
JUPYTER = Path(sys.executable).parent / "jupyter"
START_TIMEOUT_S = 60.0
OTHER_EXTENSIONS = (
    "jupyterlab",
    "notebook",
    "notebook_shim",
    "jupyter_lsp",
    "jupyter_server_terminals",
    "jupyter_server_ydoc",
    "jupyter_collaboration",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ApiServer:
    """``jupyter server`` serving the store at :attr:`db_path` (opened on first use)."""

    def __init__(self, base: Path, *, extra: Sequence[str] = ()) -> None:
        self.base = base
        self.db_path = base / "sessions.sqlite3"
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = base / "jupyter-server.log"
        self.extra = list(extra)
        self.env = self._env()
        self._proc: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        for name in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
            folder = self.base / name.lower()
            folder.mkdir(parents=True, exist_ok=True)
            env[name] = str(folder)
        env["JUPYTER_CONFIG_PATH"] = str(CONFIG_PATH)
        env["MIBYAN_DB"] = str(self.db_path)
        return env

    def command(self) -> list[str]:
        root = self.base / "root"
        root.mkdir(exist_ok=True)
        switched_off: list[str] = []
        for name in OTHER_EXTENSIONS:
            switched_off += ["--ServerApp.jpserver_extensions", f"{name}=False"]
        return [
            str(JUPYTER),
            "server",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
            *switched_off,
            *self.extra,
        ]

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self.command(),
                env=self.env,
                cwd=self.base,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"jupyter server exited early:\n{self.log()}")
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"jupyter server did not answer:\n{self.log()}")

    def _answers(self) -> bool:
        try:
            reply = httpx.get(f"{self.url}/api/status", headers=self.auth(), timeout=2)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def client(self, *, token: bool = True) -> httpx.Client:
        """A client of the API (``token``: every request carries the token header)."""
        return httpx.Client(
            base_url=f"{self.url}/mibyan/api",
            headers=self.auth() if token else {},
            timeout=30,
            follow_redirects=False,
        )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
