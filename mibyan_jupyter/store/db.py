"""Opening the session database: where it lives, how it is protected, how it migrates.

Safety rules, each one tested:

* The default file is ``<jupyter data dir>/mibyan/sessions.sqlite3``; ``MIBYAN_DB`` or the
  ``path`` argument override it.
* A file that is not a SQLite database, is corrupt or unreadable is refused with an error
  that names it, and is never written to (no migration, no WAL file created first).
* A database made by a newer version (a higher schema number) is refused: we cannot know
  what its tables mean.
* Migrations are numbered, append-only SQL files, applied in one ``BEGIN IMMEDIATE``
  transaction each, so two kernels opening a fresh file at once do not race.
* WAL mode, foreign keys, a busy timeout, and writes that retry on ``database is locked``
  instead of surfacing it. ``synchronous=NORMAL`` by default: in WAL mode a committed
  transaction survives a killed process (what a kernel crash is); ``durability="full"``
  also survives power loss at ~5x the cost per commit.
* A write that still fails raises one :class:`StoreError` line that names the file and the
  cause (read-only, locked, disk full, closed, I/O error), with the cause's
  :data:`FailureKind` for code that must tell them apart (the store writer retries the
  passing ones; docs/architecture.md, "Store"). See :mod:`.files`.
* One connection may be used by several threads (the store writer writes on a thread of
  its own): :meth:`Database.transaction` holds the connection's lock for the whole
  transaction, so two threads never mix statements of two transactions.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from mibyan_jupyter.store.audit import current_user, owns_file, tag_new_sessions
from mibyan_jupyter.store.dialect import SQLITE, Dialect
from mibyan_jupyter.store.files import (
    ENV_PATH,
    FailureKind,
    StoreError,
    check_file,
    count_open,
    default_path,
    numbered_migrations,
    write_failure,
)
from mibyan_jupyter.store.netfs import warn_if_network

Durability = Literal["normal", "full"]
__all__ = [
    "LATEST",
    "Database",
    "Durability",
    "FailureKind",
    "StoreError",
    "default_path",
    "migrations",
    "write_failure",
]


def migrations() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every bundled SQLite migration, in order."""
    return numbered_migrations()


LATEST = len(migrations())


class Database:
    """One connection (autocommit; explicit transactions) to the session store: the
    embedded backend of store/conn.py's :class:`~.conn.StoreDatabase`."""

    dialect: Dialect = SQLITE

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = 5.0,
        durability: Durability = "normal",
        lock_retry_seconds: float = 30.0,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.lock_retry_seconds = lock_retry_seconds
        self.busy_timeout = busy_timeout
        self.lock = threading.RLock()
        """Held for each transaction (see the module docstring)."""
        check_file(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(
                f"cannot create the folder of the session database {self.path}: {error}"
            ) from None
        try:
            self.conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the session database {self.path}: {error}") from None
        count_open(self.path, +1)
        self._closed = False
        try:
            version = self._schema_version()
            if version > LATEST:
                raise StoreError(
                    f"{self.path} was written by a newer mibyan-jupyter (schema {version}; "
                    f"this version knows up to {LATEST}). Upgrade the package, or point "
                    f"{ENV_PATH} at another file. The file was left untouched."
                )
            self._retry_locked(lambda: self.conn.execute("PRAGMA journal_mode=WAL"))
            self.conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            if version < LATEST:
                self._migrate()
            tag_new_sessions(self.conn)  # whose a session is (store/audit.py)
        except BaseException:
            self.close()
            raise
        warn_if_network(self.path)  # once per file (store/netfs.py)

    def _retry_locked(self, step: Callable[[], object]) -> None:
        """Run ``step`` again while SQLite says the file is locked, up to the retry window:
        switching a fresh file to WAL needs a moment with no other connection in it, and
        SQLite answers "locked" at once instead of waiting (two kernels opening a new
        file together, one of them migrating)."""
        deadline = time.monotonic() + self.lock_retry_seconds
        delay = 0.01
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise write_failure(self.path, error) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _schema_version(self) -> int:
        """``PRAGMA user_version``; reading it also proves the file is a usable database."""
        try:
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            row = self.conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.DatabaseError as error:
            raise StoreError(
                f"{self.path} is not a usable SQLite database ({error}); it was left untouched. "
                f"Move it away, or point {ENV_PATH} at another file."
            ) from None
        return int(row[0])

    def _migrate(self) -> None:
        for number, _name, sql in migrations():
            rebuild = FOREIGN_KEYS_OFF in sql
            if rebuild:  # a table rebuild: off outside the transaction, or it is a no-op
                self.conn.execute("PRAGMA foreign_keys=OFF")
            try:
                with self.transaction():
                    # Re-read inside the write lock: another kernel may have migrated meanwhile.
                    current = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
                    if number <= current:
                        continue
                    for statement in _statements(sql):
                        self.conn.execute(statement)
                    if rebuild and self.conn.execute("PRAGMA foreign_key_check").fetchone():
                        raise StoreError(f"migration {number} would break a foreign key")
                    self.conn.execute(f"PRAGMA user_version={number}")
            finally:
                if rebuild:
                    self.conn.execute("PRAGMA foreign_keys=ON")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; waits out other writers (busy timeout, then
        retries with backoff up to ``lock_retry_seconds``) so "database is locked" does
        not reach the user; rolls back on error. A SQLite failure of the body (disk full,
        read-only file, closed connection) is raised as a :func:`write_failure` line."""
        with self.lock:
            self._begin()
            try:
                yield self.conn
            except (sqlite3.OperationalError, sqlite3.ProgrammingError) as error:
                self._rollback()
                raise write_failure(self.path, error) from error
            except BaseException:
                self._rollback()
                raise
            self._commit()

    def _rollback(self) -> None:
        """Undo the open transaction unless SQLite already has: after some errors (disk
        full, I/O error, out of memory) it rolls back by itself, and a bare ``ROLLBACK``
        would then fail with "no transaction is active", hiding the error that matters."""
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")

    def _begin(self) -> None:
        deadline = time.monotonic() + self.lock_retry_seconds
        delay = 0.01
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.ProgrammingError as error:  # a closed connection
                raise write_failure(self.path, error) from None
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) and "busy" not in str(error):
                    raise write_failure(self.path, error) from None
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{self.path} stayed locked by another process for "
                        f"{self.lock_retry_seconds:g} s; nothing was written",
                        kind="locked",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _commit(self) -> None:
        deadline = time.monotonic() + self.lock_retry_seconds
        while True:
            try:
                self.conn.execute("COMMIT")
                return
            except sqlite3.OperationalError as error:
                if (
                    "locked" not in str(error) and "busy" not in str(error)
                ) or time.monotonic() >= deadline:
                    self._rollback()
                    raise write_failure(self.path, error) from None
                time.sleep(0.05)

    @property
    def user(self) -> str:
        """The environment's word on SQLite (store/audit.py: a convenience, not a guarantee)."""
        return current_user()

    @property
    def sees_legacy(self) -> bool:
        """The file's owner sees its sessions from before schema 6 (store/scope.py)."""
        return owns_file(self.path)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            count_open(self.path, -1)
        self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FOREIGN_KEYS_OFF = "-- mibyan: foreign keys off"
"""The line a migration that rebuilds a table carries: SQLite's documented procedure for
schema changes ALTER TABLE cannot make runs with foreign keys off (a DROP TABLE with them
on cascades into the tables that reference it) and checks them before committing
(migration 0005; docs/architecture.md, "Store")."""


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` knows triggers)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        if not buffer and line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise StoreError(f"incomplete SQL statement in a migration: {buffer.strip()[:80]}")
    return statements
