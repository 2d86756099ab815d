"""A session database on a network file system: found, and said once.

SQLite's locking relies on the file system; NFS and SMB get it wrong often enough that
SQLite's own documentation and JupyterHub's warn against a database in an NFS home folder
(WAL mode needs shared memory between the processes, which a network share cannot give
kernels on different machines). So a database opened there gets one warning per file and
process, naming the way out: the PostgreSQL store (docs/architecture.md, "Admin policy",
"Safer SQLite"). It is a warning, not a refusal: one kernel on one machine mostly works.

Found by the mount table (``/proc/mounts``: the longest mount point above the file's
folder, and its type), Linux only; elsewhere nothing is said.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

NETWORK_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs",
        "lustre", "gpfs", "beegfs", "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs",
    }
)  # fmt: skip
MOUNTS = Path("/proc/mounts")


class NetworkFilesystemWarning(UserWarning):
    """The session database is on a network file system."""


def _unescape(field: str) -> str:
    """``/proc/mounts`` writes a space as ``\\040`` (and tab, newline, backslash alike)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_type(path: Path, mounts: str) -> str | None:
    """The type of the file system ``path`` is on, by the mount table text ``mounts``."""
    target = os.path.realpath(path)
    best, kind = "", None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _unescape(parts[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def network_filesystem(path: Path) -> str | None:
    """The network file system type ``path`` is on (``None``: local, or unknown)."""
    try:
        mounts = MOUNTS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    kind = filesystem_type(path, mounts)
    return kind if kind in NETWORK_TYPES else None


_warned: set[str] = set()
_lock = threading.Lock()


def warn_if_network(path: Path, *, mounts: str | None = None) -> str | None:
    """Warn once per file and process when ``path`` is on a network file system; returns
    the warning's text (``None``: nothing to say, or said before)."""
    folder = path.parent
    kind = filesystem_type(folder, mounts) if mounts is not None else network_filesystem(folder)
    if kind is None or (mounts is not None and kind not in NETWORK_TYPES):
        return None
    key = os.path.realpath(path)
    with _lock:
        if key in _warned:
            return None
        _warned.add(key)
    text = (
        f"mibyan: the session database {path} is on a network file system ({kind}); SQLite's "
        "locking is unreliable there (two kernels can corrupt it). Use the PostgreSQL store: "
        "c.AgentMagics.db_url = 'postgresql://...' or MIBYAN_DB_URL, or set MIBYAN_DB to a "
        "local disk."
    )
    warnings.warn(text, NetworkFilesystemWarning, stacklevel=3)
    return text
