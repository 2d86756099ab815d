"""Writing an admin policy file the way the tests need it: root's, mode 0644 (so trusted,
when the tests run as root), with a fresh mtime so the policy cache sees the change
(mibyan_jupyter/policy/files.py), in a folder only root can write."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def write_policy(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    now = time.time_ns()
    os.utime(path, ns=(now, now))


@contextlib.contextmanager
def policy_folder() -> Iterator[Path]:
    """``policy.toml`` in a fresh root-owned folder others can read, not write (outside
    pytest's 0700 temp dirs, so another user's kernel can read it), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="mibyan-policy-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder / "policy.toml"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
