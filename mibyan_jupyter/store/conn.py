"""What the store's modules write their SQL against, whichever database holds the store.

Why protocols and not one class: the embedded store is a :class:`sqlite3.Connection`
as it is (no wrapper on its hot path: an append is ~0.1 ms), and the team store is
psycopg behind :class:`~.pg.conn.PgConn`, which speaks the same small surface
(``execute`` with ``?`` placeholders, ``fetchone``/``fetchall``/``rowcount``). A store
module asks for a :class:`Conn` inside ``db.transaction()`` and reads through ``db.conn``;
where the dialects differ it asks ``db.dialect`` (:mod:`.dialect`), never the type of the
connection (docs/architecture.md, "The team store (PostgreSQL)").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from mibyan_jupyter.store.dialect import Dialect


class Cursor(Protocol):
    """The result of one statement: its rows, or how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """One connection (inside a transaction, or reading): ``?`` placeholders on both."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...


class StoreDatabase(Protocol):
    """A session store's database: the SQLite file (:class:`~.db.Database`) or the
    PostgreSQL team store (:class:`~.pg.connect.PgDatabase`)."""

    @property
    def path(self) -> Path | str:
        """Where it is, for messages: the file, or the team store's server and database
        (never a secret)."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def conn(self) -> Conn:
        """For reads: the transaction this thread holds, if any, else any connection."""

    @property
    def user(self) -> str:
        """Whose sessions this connection makes and lists (store/scope.py)."""

    @property
    def sees_legacy(self) -> bool:
        """Whether sessions with no user (from before schema 6) are this user's."""

    def transaction(self) -> AbstractContextManager[Conn]: ...

    def close(self) -> None: ...
