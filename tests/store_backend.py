"""The store suite runs on both backends (tests/store/conftest.py makes the fixture
visible there; other suites may import it the same way): ``backend`` is a SQLite file in the test's temp
folder, or a fresh database of the session's throwaway PostgreSQL (tests/pg_server.py)
with a hub user of its own. A test that takes ``backend`` (or ``store``) runs twice; a test
about SQLite's file itself (its header, WAL, locks, permissions) keeps taking ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgTestDb, PgUser, fresh_database

from mibyan_jupyter.store.sessions import SessionStore


@dataclass
class Backend:
    """Where a test's store lives, and how to reach it as a given user."""

    name: str
    target: str | Path
    """What ``SessionStore(...)``, ``LeaseKeeper(...)`` and ``StoreWriter`` open: the
    file, or the team store's URL as this test's student (no password in it)."""
    monkeypatch: pytest.MonkeyPatch
    pg: PgTestDb | None = None
    pg_user: PgUser | None = None
    _users: dict[str, str | Path] = field(default_factory=dict)

    @property
    def is_postgres(self) -> bool:
        return self.pg is not None

    def store(self, **kwargs: Any) -> SessionStore:
        return SessionStore(self.target, **kwargs)

    def as_user(self, name: str, course: str | None = None, role: str = "student") -> str | Path:
        """The target as another user: on SQLite the same file with ``JUPYTERHUB_USER``
        set to ``name`` (call it again to switch); on PostgreSQL a login role of its own
        (the database's word: no environment variable changes whose rows they are)."""
        if self.pg is None:
            self.monkeypatch.setenv("JUPYTERHUB_USER", name)
            return self.target
        if name not in self._users:
            self._users[name] = self.pg.url(self.pg.user(name, course=course, role=role).name)
        return self._users[name]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", tmp_path / "sessions.sqlite3", monkeypatch)
        return
    cluster = request.getfixturevalue("pg_cluster")
    with fresh_database(cluster) as db:
        user = db.user("student")
        yield Backend("postgresql", db.url(user.name), monkeypatch, db, user)
