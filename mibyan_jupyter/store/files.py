"""The session database as a file: where it lives, refusing a file that is not a database,
and what a failed write says.

Why apart from :mod:`.db` (which re-exports these): the rules about the file itself are
the ones that protect the user's data before SQLite is even asked, and each has a reason
that is easy to break by accident:

* the default path is ``<jupyter data dir>/mibyan/sessions.sqlite3``; ``MIBYAN_DB``
  overrides it;
* a file that is not SQLite is refused untouched, by its first bytes; but never by
  reading a file this process already has a connection to (see :func:`check_file`);
* a failed write is one :class:`StoreError` line naming the file and the cause, with its
  :data:`FailureKind`: the store writer retries the causes that pass and stops on the
  others (docs/architecture.md, "Store").
"""

from __future__ import annotations

import os
import re
import threading
from importlib import resources
from pathlib import Path
from typing import Literal

SQLITE_MAGIC = b"SQLite format 3\x00"
ENV_PATH = "MIBYAN_DB"
ENV_URL = "MIBYAN_DB_URL"
"""The team store's URL (store/backend.py); here, beside the file's, so choosing a store
imports nothing of the PostgreSQL side until a URL is opened."""
TEAM_STORE_LABEL = "the team store ("
"""How a team store's ``path`` begins (for messages; never opened as a file)."""


def database_url(configured: str | None = None) -> str | None:
    """The team store's URL: the configured one (``c.AgentMagics.db_url``), else
    ``MIBYAN_DB_URL``; ``None`` when neither is set (the SQLite store is used)."""
    return configured or os.environ.get(ENV_URL) or None


def default_path() -> Path:
    """``$MIBYAN_DB``, else ``<jupyter data dir>/mibyan/sessions.sqlite3``."""
    override = os.environ.get(ENV_PATH)
    if override:
        return Path(override).expanduser()
    try:
        from jupyter_core.paths import jupyter_data_dir

        base = Path(jupyter_data_dir())
    except ImportError:  # jupyter_core comes with ipykernel; keep working without it
        base = Path.home() / ".local" / "share" / "jupyter"
    return base / "mibyan" / "sessions.sqlite3"


FailureKind = Literal["locked", "read-only", "full", "io", "closed", "lease", "other"]
"""Why a write failed. ``closed`` and ``lease`` (another kernel holds the session) do not
pass by themselves; the others may (a lock is released, space is freed, a file is made
writable again)."""


class StoreError(RuntimeError):
    """The store cannot be used as it is; the message names the file and what to do."""

    def __init__(self, message: str, *, kind: FailureKind = "other") -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


_CAUSES: tuple[tuple[str, FailureKind, str], ...] = (
    ("readonly", "read-only", "the file is read-only"),
    ("read-only", "read-only", "the file is read-only"),
    ("full", "full", "the disk is full"),
    ("locked", "locked", "it is locked by another process"),
    ("busy", "locked", "it is locked by another process"),
    ("closed", "closed", "its connection was closed"),
    ("disk i/o", "io", "a disk I/O error"),
    ("unable to open", "io", "the file cannot be opened"),
)


def write_failure(path: Path | str, error: BaseException) -> StoreError:
    """One line for a failed write: the file, the cause in plain words, SQLite's own
    message (``cannot write to PATH: the file is read-only (attempt to write a readonly
    database)``). A :class:`StoreError` is returned as it is."""
    if isinstance(error, StoreError):
        return error
    text = str(error)
    for needle, kind, cause in _CAUSES:
        if needle in text.lower():
            failure = StoreError(f"cannot write to {path}: {cause} ({text})", kind=kind)
            break
    else:
        failure = StoreError(f"cannot write to {path}: {type(error).__name__}: {text}")
    failure.__cause__ = error
    return failure


_OPEN: dict[str, int] = {}
"""Files this process has SQLite connections to, with how many (see :func:`check_file`)."""
_OPEN_LOCK = threading.Lock()


def _key(path: Path) -> str:
    return os.path.realpath(path)


def check_file(path: Path) -> None:
    """Refuse, without touching it, a file that is not a SQLite database.

    Skipped when this process already has a connection to the file (it is a database,
    then): closing any descriptor of a file drops every POSIX lock the process holds on
    it, SQLite's included, so reading the header with Python's own ``open`` next to a live
    connection (the lease keeper's beside the store's) would let another process write
    under that connection's feet and lose commits.
    """
    with _OPEN_LOCK:
        if _OPEN.get(_key(path)):
            return
    if not path.exists():
        return
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except OSError as error:
        raise StoreError(f"cannot read the session database {path}: {error}") from None
    if header and header != SQLITE_MAGIC:
        raise StoreError(
            f"{path} is not a SQLite database (or is corrupt); it was left untouched. "
            f"Move it away, or point {ENV_PATH} at another file."
        )


def count_open(path: Path, change: int) -> None:
    """This process opened (``+1``) or closed (``-1``) a connection to ``path``."""
    with _OPEN_LOCK:
        key = _key(path)
        count = _OPEN.get(key, 0) + change
        if count > 0:
            _OPEN[key] = count
        else:
            _OPEN.pop(key, None)


def numbered_migrations(folder: str = "") -> list[tuple[int, str, str]]:
    """(number, name, sql) of every ``NNNN_name.sql`` bundled in
    ``mibyan_jupyter/store/migrations/`` (SQLite's) or its ``folder`` (``"pg"``), in
    order; refuses a set not numbered 1..n (a gap would skip a schema change)."""
    base = resources.files("mibyan_jupyter.store.migrations")
    found = []
    for entry in (base.joinpath(folder) if folder else base).iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [number for number, _, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise StoreError(f"{folder or 'SQLite'} migrations are not numbered 1..n: {numbers}")
    return found
