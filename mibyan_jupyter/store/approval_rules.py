"""The "always" approval decisions a user made, kept in the database (``approval_rules``).

Why they live in the store and not in a session: "always allow ``run_python``" is the user's
standing answer, so it holds in every session and every kernel that opens this database
until ``%agent approvals`` forgets it. :class:`ApprovalRules` is what
``ApprovalPolicy(always=..., on_always=...)`` loads from and saves to (see
``store.session_api.approval_policy``).
"""

from __future__ import annotations

import time

from mibyan_jupyter.store.db import Database


class ApprovalRules:
    """The remembered decisions of one database: tool name -> approved."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def all(self) -> dict[str, bool]:
        """Every remembered decision, by tool name."""
        rows = self.db.conn.execute("SELECT tool, approved FROM approval_rules ORDER BY tool")
        return {tool: bool(approved) for tool, approved in rows}

    def save(self, tool: str, approved: bool) -> None:
        """Remember a decision (a newer one for the same tool replaces it)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO approval_rules (tool, approved, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (tool) DO UPDATE SET approved = excluded.approved,"
                " created_at = excluded.created_at",
                (tool, int(approved), time.time()),
            )

    def forget(self, tool: str) -> bool:
        """Drop a remembered decision; whether there was one."""
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM approval_rules WHERE tool = ?", (tool,))
        return cursor.rowcount > 0
