"""One throwaway PostgreSQL for the whole test session, and a database of its own for each
test that asks: the fixtures every PostgreSQL test uses (tests/pg, and the store suite's
``postgresql`` backend in tests/store), loaded by the root conftest as a plugin.

The server (``mibyan_jupyter.testing.pg_cluster``: a unix socket in a temp folder, TCP off,
trust for the bootstrap superuser only) starts once (~0.6 s here), on first use, with fsync
off; a template database is migrated once, and each test gets ``CREATE DATABASE ...
TEMPLATE`` of it (a few ms) and drops it after. Roles are the cluster's, not a database's,
so each test's user roles get a suffix of their own. Users' passwords go to one passfile
of the session (``PGPASSFILE``, as a hub would set up), so kernels and subprocesses a test
starts connect the way a student's would, with no password in any URL. The server stops at
the end of the session, and by its parent-death signal when pytest dies
(tests/pg/test_pg_cluster.py checks both).

Without PostgreSQL (or psycopg) the tests that need it skip; under ``MIBYAN_NO_SKIP=1``
(``make test``, which installs it) they fail.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.testing.pg_cluster import PgCluster, PgUnavailable, passfile_in_environment

TEMPLATE = "mibyan_template"
_NUMBERS = itertools.count()
_PASSFILE = Path(tempfile.mkdtemp(prefix="mibyan-pgpass-")) / "pgpass"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as missing:
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            raise
        pytest.skip(f"the postgres extra is not installed ({missing})")
    return psycopg


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    psycopg = _psycopg()
    try:
        cluster = PgCluster(fsync=False)
    except PgUnavailable as missing:
        if os.environ.get("MIBYAN_NO_SKIP") == "1":
            pytest.fail(f"make test installs PostgreSQL (MIBYAN_NO_SKIP=1), yet {missing}")
        pytest.skip(str(missing))
    cluster.start()
    try:
        from mibyan_jupyter.store.pg import migrate

        with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        with psycopg.connect(cluster.conninfo(TEMPLATE), autocommit=True) as conn:
            migrate(conn)
        with passfile_in_environment(_PASSFILE):
            yield cluster
    finally:
        cluster.stop()


@dataclass
class PgUser:
    name: str
    password: str


@dataclass
class PgTestDb:
    """A migrated database of one test, on the session's server."""

    cluster: PgCluster
    name: str
    suffix: str
    opened: list[Any] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    """Roles this test made (the cluster's, not the database's): dropped after it."""

    def admin(self) -> Any:
        """A connection as the bootstrap superuser (autocommit)."""
        conn = _psycopg().connect(self.cluster.conninfo(self.name), autocommit=True)
        self.opened.append(conn)
        return conn

    def user(self, base: str, course: str | None = None, role: str = "student") -> PgUser:
        """A new hub user (LOGIN role in mibyan_app, with a password), made the way an admin
        makes one: ``mibyan-admin pg add-user``'s code."""
        from mibyan_jupyter.admin import add_user

        user = PgUser(f"{base}_{self.suffix}", secrets.token_hex(8))
        self.roles.append(user.name)
        add_user(self.admin(), user.name, course=course, role=role, password=user.password)
        with _PASSFILE.open("a") as passfile:  # how the user's kernel will find it
            passfile.write(f"*:*:*:{user.name}:{user.password}\n")
        return user

    def make_role(self, base: str, clauses: str) -> str:
        """``CREATE ROLE <base>_<suffix> <clauses>``; returns the name."""
        name = f"{base}_{self.suffix}"
        self.admin().execute(f"CREATE ROLE {name} {clauses}")
        self.roles.append(name)
        return name

    def connect_as(self, user: PgUser) -> Any:
        """A raw psycopg connection as ``user`` (autocommit, search_path unset)."""
        conn = _psycopg().connect(
            self.cluster.conninfo(self.name, user.name), password=user.password, autocommit=True
        )
        self.opened.append(conn)
        return conn

    def url(self, user: str) -> str:
        return self.cluster.url(self.name, user)


@contextlib.contextmanager
def fresh_database(cluster: PgCluster) -> Iterator[PgTestDb]:
    """A new database cloned from the migrated template, dropped afterwards."""
    number = next(_NUMBERS)
    name = f"test_{os.getpid()}_{number}"
    with _psycopg().connect(cluster.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    db = PgTestDb(cluster, name, f"{number}{secrets.token_hex(2)}")
    try:
        yield db
    finally:
        for conn in db.opened:
            conn.close()
        with _psycopg().connect(cluster.conninfo(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            for role in db.roles:
                conn.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def pg_db(pg_cluster: PgCluster) -> Iterator[PgTestDb]:
    """A database of this test's own."""
    with fresh_database(pg_cluster) as db:
        yield db


@pytest.fixture(scope="module")
def pg_module_db(pg_cluster: PgCluster) -> Iterator[PgTestDb]:
    """One database for a module's tests that only read (or must fail to write)."""
    with fresh_database(pg_cluster) as db:
        yield db
