"""The "always" approval decisions a user made, kept in the database (``approval_rules``).

Why they live in the store and not in a session: "always allow ``run_python``" is the user's
standing answer, so it holds in every session and every kernel that opens this database
until ``%agent policy reset`` forgets it. :class:`ApprovalRules` is what
``ApprovalPolicy(always=..., on_always=...)`` loads from and saves to (see
``store.session_api.approval_policy``).

Why each row is signed (migration 0004): a rule is a standing permission, so a row that
neither an "always" answer on the approval card nor a ``%agent policy`` command in a cell
the user ran wrote must not grant anything. Each row carries its ``origin`` and an HMAC of
the row keyed by a per-user secret file outside the database (:func:`rule_key_path`). A
row that does not verify (inserted with ``sqlite3`` by code, copied in with a database
from another user, written before schema 4) is ignored, listed as ignored by
``%agent policy``, and ``flagged_at`` records when it was first found. The honest limit
(docs/architecture.md, "Approvals the agent cannot grant itself"): code running as the user
can read the key too; the signature makes tampering visible, not impossible.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mibyan_jupyter.store.conn import StoreDatabase

Origin = Literal["approval", "cell"]
ORIGINS: tuple[Origin, ...] = ("approval", "cell")
KEY_ENV = "MIBYAN_RULE_KEY"
"""A path to use as the rule key instead of ``<jupyter data dir>/mibyan/rule-key``."""


class RuleWriteRefused(PermissionError):
    """A rule write the kernel's check refused (code an agent ran asked for it)."""

    def _render_traceback_(self) -> list[str]:
        return [f"RuleWriteRefused: {self}"]


@dataclass(frozen=True, slots=True)
class SavedRule:
    """One row of ``approval_rules`` and whether it may be applied."""

    tool: str
    approved: bool
    origin: str | None
    created_at: float
    trusted: bool


def rule_key_path() -> Path:
    """``$MIBYAN_RULE_KEY``, else ``<jupyter data dir>/mibyan/rule-key``: per user, not per
    database, so a database shared or copied between users carries no permission."""
    override = os.environ.get(KEY_ENV)
    if override:
        return Path(override).expanduser()
    try:
        from jupyter_core.paths import jupyter_data_dir

        base = Path(jupyter_data_dir())
    except ImportError:
        base = Path.home() / ".local" / "share" / "jupyter"
    return base / "mibyan" / "rule-key"


def _read_key() -> bytes | None:
    """The key's bytes, ``None`` while there is none (or it is not a key: then no row
    verifies, and the next save says so)."""
    try:
        return bytes.fromhex(rule_key_path().read_text().strip()) or None
    except (OSError, ValueError):
        return None


def _key_for_writing() -> bytes:
    """The key, made on the first save (owner-only, 32 random bytes)."""
    key = _read_key()
    if key is not None:
        return key
    path = rule_key_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another kernel made it meanwhile, or it is not a key
        key = _read_key()
        if key is None:
            raise RuleWriteRefused(f"{path} is not a rule key; move it away") from None
        return key
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def _mac(key: bytes, tool: str, approved: bool, origin: str, created_at: float) -> str:
    message = f"{tool}\x00{int(approved)}\x00{origin}\x00{created_at!r}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


class ApprovalRules:
    """The remembered decisions of one database: tool name -> approved."""

    def __init__(self, db: StoreDatabase) -> None:
        self.db = db
        self.write_check: Callable[[], str | None] | None = None
        """Asked before a save or a forget; a reason refuses it (the Jupyter layer's guard
        sets it: code an agent ran may not write rules)."""

    def rows(self) -> list[SavedRule]:
        """Every row, each with whether its signature verifies under the user's key."""
        key = _read_key()
        found = self.db.conn.execute(
            "SELECT tool, approved, origin, mac, created_at FROM approval_rules ORDER BY tool"
        ).fetchall()
        rules = []
        for tool, approved, origin, mac, created_at in found:
            trusted = (
                key is not None
                and origin in ORIGINS
                and isinstance(mac, str)
                and hmac.compare_digest(mac, _mac(key, tool, bool(approved), origin, created_at))
            )
            rules.append(SavedRule(tool, bool(approved), origin, created_at, trusted))
        return rules

    def all(self) -> dict[str, bool]:
        """Every decision that may be applied, by tool name. Rows that do not verify are
        left out and flagged (``flagged_at``, once per row)."""
        rules = self.rows()
        if any(not rule.trusted for rule in rules):
            with self.db.transaction() as conn:
                conn.executemany(
                    "UPDATE approval_rules SET flagged_at = ?"
                    " WHERE tool = ? AND created_at = ? AND flagged_at IS NULL",
                    [(time.time(), r.tool, r.created_at) for r in rules if not r.trusted],
                )
        return {rule.tool: rule.approved for rule in rules if rule.trusted}

    def untrusted(self) -> list[SavedRule]:
        """The rows :meth:`all` ignores (for ``%agent policy`` to show)."""
        return [rule for rule in self.rows() if not rule.trusted]

    def save(self, tool: str, approved: bool, origin: Origin = "approval") -> None:
        """Remember a decision (a newer one for the same tool replaces it), signed.
        ``origin``: ``approval`` for an "always" answer to an approval request, ``cell``
        for a ``%agent policy`` command in a cell the user ran."""
        self._check(f"saving an 'always' rule for {tool}")
        key = _key_for_writing()
        now = time.time()
        with self.db.transaction() as conn:  # PostgreSQL: the user_name is the login role's
            conn.execute(
                "INSERT INTO approval_rules (tool, approved, created_at, origin, mac, flagged_at)"
                f" VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT ({self.db.dialect.rule_key})"
                " DO UPDATE SET"
                " approved = excluded.approved, created_at = excluded.created_at,"
                " origin = excluded.origin, mac = excluded.mac, flagged_at = NULL",
                (tool, int(approved), now, origin, _mac(key, tool, approved, origin, now)),
            )

    def forget(self, tool: str) -> bool:
        """Drop a remembered decision; whether there was one."""
        self._check(f"forgetting the 'always' rule for {tool}")
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM approval_rules WHERE tool = ?", (tool,))
        return cursor.rowcount > 0

    def _check(self, what: str) -> None:
        reason = self.write_check() if self.write_check is not None else None
        if reason is not None:
            raise RuleWriteRefused(f"{what} refused: {reason}")
