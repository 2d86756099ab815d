"""A throwaway PostgreSQL server for tests and benchmarks, on a unix socket in a temp folder.

Why it ships with the package, next to the fake provider: the team store is tested against
a real server (nothing mocked), and ``bench/store.py`` measures it the same way, so both
start it through this one recipe (docs/architecture.md, "Store"):

* ``initdb`` and ``postgres`` refuse to run as root, so as root they run as the ``postgres``
  system user (Debian's package makes it); otherwise as the current user;
* the folder (data directory and socket) is a ``mkdtemp`` outside pytest's 0700 temp
  folders, handed to that user; TCP is off (``listen_addresses=''``);
* authentication: ``trust`` for the bootstrap superuser only (``mibyan``, the admin of the
  tests), ``scram-sha-256`` for every other role, so a role without the right password is
  refused as it would be on a hub;
* the server is a child of this process with a parent-death signal (SIGINT, PostgreSQL's
  fast shutdown), so it goes away even when the process is killed with SIGKILL; a normal
  exit stops it through :func:`atexit` when :meth:`PgCluster.stop` was not called.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUPERUSER = "mibyan"
"""The bootstrap superuser (trust on the socket): the tests' and benchmarks' admin."""
_PR_SET_PDEATHSIG = 1


class PgUnavailable(RuntimeError):
    """No PostgreSQL binaries here; the message says how to get them."""


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``postgres`` (``MIBYAN_PG_BIN``
    overrides)."""
    override = os.environ.get("MIBYAN_PG_BIN")
    candidates = [override] if override else glob.glob("/usr/lib/postgresql/*/bin")
    found = [Path(c) for c in candidates if (Path(c) / "postgres").is_file()]
    if not found:
        raise PgUnavailable(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): "
            "run `make postgres` (apt-get install postgresql) or set MIBYAN_PG_BIN"
        )
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


def _die_with_parent() -> None:
    """In the child after the user switch (a credential change clears the signal): the
    server gets SIGINT when the process that started it ends, however it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


class PgCluster:
    """One PostgreSQL server: ``start()``, connect with :meth:`conninfo`, ``stop()``."""

    def __init__(self, *, fsync: bool = True, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.fsync = fsync
        """``False`` for the test suite (faster CREATE DATABASE); the benchmark keeps it."""
        self.folder: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0
        """How long initdb and start took (the suite reports it)."""
        self._as_postgres = os.geteuid() == 0

    @property
    def socket_dir(self) -> str:
        assert self.folder is not None, "start() first"
        return str(self.folder)

    @property
    def pid(self) -> int:
        assert self.process is not None, "start() first"
        return self.process.pid

    def conninfo(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        """A libpq conninfo string reaching this server by its socket folder."""
        return f"host={self.socket_dir} dbname={dbname} user={user}"

    def url(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        """The same as a ``postgresql://`` URL (the socket folder as a ``host`` parameter)."""
        return f"postgresql:///{dbname}?host={self.socket_dir}&user={user}"

    def _as_server(self) -> dict[str, Any]:
        """The ``subprocess`` arguments that run a program as the server's user."""
        if not self._as_postgres:
            return {"cwd": "/"}
        return {"user": "postgres", "group": "postgres", "extra_groups": [], "cwd": "/"}

    def start(self, timeout: float = 30.0) -> PgCluster:
        began = time.monotonic()
        self.folder = Path(tempfile.mkdtemp(prefix="mibyan-pg-"))
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        data = self.folder / "data"
        initdb = [str(self.bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust"]
        initdb += ["-N", "-E", "UTF8", "--locale=C.UTF-8"]
        subprocess.run(initdb, check=True, capture_output=True, **self._as_server())
        hba = f"local all {SUPERUSER} trust\nlocal all all scram-sha-256\n"
        self._write_as_server(data / "pg_hba.conf", hba)
        server = [str(self.bin_dir / "postgres"), "-D", str(data), "-k", str(self.folder)]
        fsync = "on" if self.fsync else "off"
        for setting in ("listen_addresses=", f"fsync={fsync}", "max_connections=100"):
            server += ["-c", setting]
        with open(self.folder / "log", "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                server,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=_die_with_parent,
                **self._as_server(),
            )
        atexit.register(self.stop)
        self._wait_ready(timeout)
        self.start_seconds = time.monotonic() - began
        return self

    def _write_as_server(self, path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        if self._as_postgres:
            shutil.chown(path, "postgres", "postgres")

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited at start: {self.log_tail()}")
            try:
                psycopg.connect(self.conninfo(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not start: {self.log_tail()}") from None
                time.sleep(0.02)

    def log_tail(self, lines: int = 20) -> str:
        if self.folder is None or not (self.folder / "log").exists():
            return ""
        return "\n".join((self.folder / "log").read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Fast shutdown (clients are disconnected), then the folder is removed."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        folder, self.folder = self.folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> PgCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def passfile_in_environment(passfile: Path) -> Iterator[Path]:
    """``PGPASSFILE`` names ``passfile`` (made empty, mode 0600, when missing) while the
    block runs, then is what it was: the passwords of the server's login roles go there,
    as a hub hands each user theirs, so no URL ever holds one and the kernels, workers and
    subprocesses started meanwhile inherit it."""
    passfile.touch(mode=0o600)
    before = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(passfile)
    try:
        yield passfile
    finally:
        if before is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = before
