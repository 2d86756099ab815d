"""A throwaway team store for bench/store.py: its own PostgreSQL server and login role.

Why its own server and not the test suite's: the figures are durability figures, so the
server runs with ``fsync`` ON (``mibyan_jupyter.testing.pg_cluster``; the suite turns it
off to make ``CREATE DATABASE`` fast) and the default ``synchronous_commit = on``: a commit
returns once its WAL is flushed to the disk, as on a hub. The user is made the way an admin
makes one (``mibyan_jupyter.admin.add_user``: a LOGIN role in ``mibyan_app``, row-level
security applies), and its password goes to a ``PGPASSFILE`` in a temp folder, as
tests/pg_server.py does, so no password is in any URL and the 20 writer processes find it
the way a student's kernel would (docs/architecture.md, "The team store (PostgreSQL)").
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USER = "bench"


@dataclass
class TeamStore:
    """The running server: ``url`` is the bench user's, :meth:`admin` the superuser's."""

    cluster: Any
    url: str

    def admin(self) -> Any:
        """A superuser connection (autocommit; row-level security does not hide rows from
        it), to count what the users' processes stored."""
        import psycopg

        return psycopg.connect(self.cluster.conninfo(), autocommit=True)


@contextlib.contextmanager
def team_store() -> Iterator[TeamStore | str]:
    """The running team store, or a string saying why there is none (no PostgreSQL
    binaries, or the ``postgres`` extra is missing); the server stops at the end."""
    try:
        import psycopg

        from mibyan_jupyter.admin import add_user
        from mibyan_jupyter.store.pg import migrate
        from mibyan_jupyter.testing.pg_cluster import (
            PgCluster,
            PgUnavailable,
            passfile_in_environment,
        )
    except ImportError as missing:
        yield f"{missing} (install mibyan-jupyter[postgres])"
        return
    try:
        cluster = PgCluster(fsync=True).start()
    except PgUnavailable as missing:
        yield str(missing)
        return
    with tempfile.TemporaryDirectory(prefix="mibyan-bench-pgpass-") as folder:
        password = secrets.token_hex(12)
        passfile = Path(folder) / "pgpass"
        passfile.touch(mode=0o600)
        passfile.write_text(f"*:*:*:{USER}:{password}\n", encoding="utf-8")
        try:  # the spawned writers inherit PGPASSFILE
            with passfile_in_environment(passfile):
                with psycopg.connect(cluster.conninfo(), autocommit=True) as admin:
                    migrate(admin)
                    add_user(admin, USER, course=None, role="student", password=password)
                yield TeamStore(cluster, cluster.url("postgres", USER))
        finally:
            cluster.stop()
