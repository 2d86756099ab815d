"""Whose sessions a reader sees: the one rule every listing, search and API applies.

A session belongs to the user who made it (``sessions.user_name``, migration
``0006_users_audit.sql``, tagged by store/audit.py). A reader sees their own sessions and,
when they own the database file, the sessions from before schema 6 (``user_name`` NULL,
which can only have been the file owner's). Every read that lists or finds sessions for
a user builds its SQL from :meth:`UserScope.clause`, so the listing, the search, the
resume check and the sessions API cannot drift apart into several rules.

On SQLite this is the environment's word (``JUPYTERHUB_USER``, else the OS user), a
convenience for honest users sharing a file, not a guarantee: the database's login role
is the authority on PostgreSQL (docs/architecture.md, "Admin policy"). A session of
another user is answered exactly as a missing one, so a reader cannot learn that it
exists (the sessions API's ``not_found``, never ``forbidden``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mibyan_jupyter.store.conn import StoreDatabase


@dataclass(frozen=True, slots=True)
class UserScope:
    """The sessions of ``user`` (``None``: every user's), and with ``legacy`` also those
    with no user (from before schema 6)."""

    user: str | None
    legacy: bool = True
    others: bool = False
    """The sessions of everyone *but* ``user`` that the reader may see: on the team store
    an instructor's students' (row-level security shows no one else's; the sessions
    API's ``scope=course``)."""

    def clause(self, alias: str = "s") -> tuple[str, tuple[object, ...]]:
        """The SQL condition on the sessions table ``alias`` and its parameters;
        ``("1=1", ())`` for every user's sessions."""
        if self.user is None:
            return "1=1", ()
        column = f"{alias}.user_name"
        if self.others:
            return f"({column} <> ?)", (self.user,)
        legacy = f" OR {column} IS NULL" if self.legacy else ""
        return f"({column} = ?{legacy})", (self.user,)

    def admits(self, owner: str | None) -> bool:
        """Whether a session recorded for ``owner`` is in this scope."""
        if self.user is None:
            return True
        if self.others:
            return owner is not None and owner != self.user
        return owner == self.user or (owner is None and self.legacy)


EVERYONE = UserScope(None)
"""No filter: an admin's or a benchmark's view of the whole file."""


def user_scope(db: StoreDatabase) -> UserScope:
    """The current user's scope in ``db``: on SQLite the environment's user (and the file's
    owner sees the sessions from before schema 6), on PostgreSQL the login role."""
    return UserScope(db.user, db.sees_legacy)
