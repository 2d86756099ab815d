"""Which folders' MCP files the user trusts (as VS Code's workspace trust, per file hash).

Why: a folder's ``.jupyter/mcp.json`` names commands the kernel would start, and a folder
is often someone else's (a cloned repository, a shared course folder). So its servers
start only after the user said yes to exactly these bytes: trust is kept per (folder
file, sha256 of its bytes) in a user-level file, ``<jupyter data dir>/mibyan/
mcp-trust.json`` (written atomically, owner-only), and a file that changed since needs
trust again. The user's own file (``config.py``) needs none.

Headless (nbclient, papermill, CI) nobody can be asked, so a folder is trusted there only
when configured: ``c.AgentMagics.mcp_trust_folders`` or ``MIBYAN_MCP_TRUST`` (folders
separated by ``os.pathsep``, read once when the extension loads, like ``MIBYAN_APPROVE``).
A configured folder is trusted whatever its file holds: whoever configured it said so.

The agent must not be able to trust a folder for itself (docs/architecture.md, "Approvals
the agent cannot grant itself"): :meth:`TrustStore.trust` asks its ``write_check`` first,
which the Jupyter layer sets to the kernel's guard. What this does not stop, honestly:
code in the kernel can write the trust file as the user can.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mibyan_jupyter.mcp.config import write_private

TRUST_ENV = "MIBYAN_MCP_TRUST"
FILE_NAME = "mcp-trust.json"
TrustState = Literal["trusted", "configured", "changed", "untrusted"]
"""``trusted``: these bytes were trusted; ``configured``: the folder is configured as
trusted; ``changed``: the file was trusted, but its bytes changed since; ``untrusted``."""


class TrustRefused(PermissionError):
    """Trust asked for by code the agent ran (or during a run): one line."""

    def _render_traceback_(self) -> list[str]:
        return [f"TrustRefused: {self}"]


def trust_path() -> Path:
    """``<jupyter data dir>/mibyan/mcp-trust.json`` (``$JUPYTER_DATA_DIR`` moves it)."""
    try:
        from jupyter_core.paths import jupyter_data_dir

        base = Path(jupyter_data_dir())
    except ImportError:
        base = Path.home() / ".local" / "share" / "jupyter"
    return base / "mibyan" / FILE_NAME


def digest(path: Path) -> str | None:
    """The sha256 of the file's bytes, ``None`` when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def env_folders(value: str | None) -> tuple[str, ...]:
    """The folders of a ``MIBYAN_MCP_TRUST`` value (``os.pathsep``-separated)."""
    return tuple(part for part in (value or "").split(os.pathsep) if part.strip())


def folder_of(file: Path) -> Path:
    """The notebook folder a folder file belongs to (``<folder>/.jupyter/mcp.json``)."""
    parent = Path(file).resolve().parent
    return parent.parent if parent.name == ".jupyter" else parent


@dataclass(frozen=True, slots=True)
class Trusted:
    """One trusted file: its path, the digest trusted, and when (Unix time)."""

    file: str
    sha256: str
    at: float


class TrustStore:
    """The trust file, read on every question (another kernel may have trusted since)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        configured: Iterable[str | Path] = (),
        write_check: Callable[[], str | None] | None = None,
    ) -> None:
        self.path = path if path is not None else trust_path()
        self.configured = tuple(Path(folder).expanduser().resolve() for folder in configured)
        self.write_check = write_check
        """Asked before trust is given or taken back; a reason refuses it."""

    def state(self, file: Path, sha256: str | None = None) -> TrustState:
        """Whether ``file`` (with the bytes whose digest is ``sha256``, default: its bytes
        now) may start its servers."""
        if folder_of(file) in self.configured:
            return "configured"
        sha256 = sha256 if sha256 is not None else digest(file)
        entry = self._entries().get(str(Path(file).resolve()))
        if entry is None or sha256 is None:
            return "untrusted"
        return "trusted" if entry.sha256 == sha256 else "changed"

    def is_trusted(self, file: Path, sha256: str | None = None) -> bool:
        return self.state(file, sha256) in ("trusted", "configured")

    def trust(self, file: Path, sha256: str | None = None) -> Trusted:
        """Trust ``file``'s bytes (``sha256``: those the user was shown, default: now)."""
        self._check("trusting an MCP file")
        sha256 = sha256 if sha256 is not None else digest(file)
        if sha256 is None:
            raise FileNotFoundError(f"{file} cannot be read: nothing to trust")
        entry = Trusted(str(Path(file).resolve()), sha256, time.time())
        entries = self._entries()
        entries[entry.file] = entry
        self._write(entries)
        return entry

    def forget(self, file: Path) -> bool:
        """Take trust back from ``file``; whether it was trusted."""
        self._check("forgetting an MCP file's trust")
        entries = self._entries()
        found = entries.pop(str(Path(file).resolve()), None)
        if found is not None:
            self._write(entries)
        return found is not None

    def entries(self) -> list[Trusted]:
        return sorted(self._entries().values(), key=lambda entry: entry.file)

    def _check(self, what: str) -> None:
        reason = self.write_check() if self.write_check is not None else None
        if reason is not None:
            raise TrustRefused(f"{what} refused: {reason}")

    def _entries(self) -> dict[str, Trusted]:
        """The trusted files; an unreadable or malformed trust file trusts nothing."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return {}
        found: dict[str, Trusted] = {}
        for item in raw.get("trusted", []) if isinstance(raw, dict) else []:
            try:
                entry = Trusted(str(item["file"]), str(item["sha256"]), float(item["at"]))
            except (KeyError, TypeError, ValueError):
                continue
            found[entry.file] = entry
        return found

    def _write(self, entries: dict[str, Trusted]) -> None:
        items = [
            {"file": entry.file, "sha256": entry.sha256, "at": entry.at}
            for entry in sorted(entries.values(), key=lambda entry: entry.file)
        ]
        write_private(self.path, json.dumps({"trusted": items}, indent=2) + "\n")
        os.chmod(self.path, 0o600)
