"""The team store's connections, speaking the store's SQL: ``?`` placeholders, tuples,
plain numbers, and one :class:`StoreError` line for any failure.

Why a thin wrapper rather than two copies of the store's queries: the PostgreSQL schema
keeps SQLite's tables and types (store/dialect.py names the few places the SQL differs),
so each statement is translated once (cached) and run as it is: ``?`` becomes ``%s`` and a
literal ``%`` is doubled, outside quoted strings. ``sum()`` over integers is ``numeric``
in PostgreSQL, which psycopg loads as :class:`~decimal.Decimal`; the store's readers
expect what SQLite returns, so numeric values are loaded as ``int`` (no fraction) or
``float`` (docs/architecture.md, "The team store (PostgreSQL)").

A failure becomes :func:`pg_failure`: the server's own words, scrubbed of any password,
with a :data:`~..files.FailureKind` the store writer acts on (a lost connection or a
server restarting passes and is retried; a permission refused does not).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.store.files import FailureKind, StoreError
from mibyan_jupyter.store.pg.scrub import scrub

if TYPE_CHECKING:
    import psycopg

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """The store's SQL in psycopg's placeholder style (quoted text left as it is)."""

    def swap(match: re.Match[str]) -> str:
        token = match[0]
        return "%s" if token == "?" else "%%" if token == "%" else token

    return _TOKEN.sub(swap, sql)


class Rows:
    """A finished statement's rows, fetched whole (a read outside any transaction gives
    its connection back to the pool before the caller looks at the rows)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self._next = 0
        self._rowcount = rowcount

    @property
    def rowcount(self) -> int:
        return self._rowcount

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def run(conn: psycopg.Connection[Any], sql: str, parameters: Any = ()) -> Rows:
    """Execute one statement of the store's SQL and fetch what it returns."""
    cursor = conn.execute(translate(sql), parameters or None)
    rows = cursor.fetchall() if cursor.description is not None else []
    return Rows(rows, cursor.rowcount)


class PgConn:
    """A pooled connection inside a transaction, as the store's modules use one."""

    def __init__(self, conn: psycopg.Connection[Any], label: str) -> None:
        self.raw = conn
        self.label = label

    def execute(self, sql: str, parameters: Any = (), /) -> Rows:
        return run(self.raw, sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Rows:
        with self.raw.cursor() as cursor:
            cursor.executemany(translate(sql), list(parameters))
            return Rows([], cursor.rowcount)


_KINDS: tuple[tuple[str, FailureKind], ...] = (
    ("40001", "locked"),  # serialization failure
    ("40P01", "locked"),  # deadlock detected
    ("55P03", "locked"),  # lock not available
    ("25006", "read-only"),  # read-only transaction (a standby, default_transaction_read_only)
    ("53100", "full"),  # disk full
    ("53", "full"),  # insufficient resources (out of memory, too many connections)
    ("57P", "io"),  # the server is shutting down or restarting
    ("08", "io"),  # connection exception
    ("58", "io"),  # system error (I/O)
)
_CAUSE: dict[FailureKind, str] = {
    "locked": "another session held the rows it needed",
    "read-only": "the server accepts no writes",
    "full": "the server is out of space or resources",
    "io": "the connection to the server was lost",
    "closed": "its connection pool was closed",
}


def failure_kind(error: BaseException) -> FailureKind:
    """Which :data:`FailureKind` a psycopg (or pool) error is."""
    from psycopg_pool import PoolClosed, PoolTimeout

    if isinstance(error, PoolClosed):
        return "closed"
    if isinstance(error, PoolTimeout):
        return "locked"
    state = getattr(error, "sqlstate", None) or ""
    for prefix, kind in _KINDS:
        if state.startswith(prefix):
            return kind
    import psycopg

    if isinstance(error, psycopg.OperationalError) and not state:
        return "io"  # no SQLSTATE: libpq lost the connection itself
    return "other"


def pg_failure(label: str, error: BaseException) -> StoreError:
    """One line for a failed statement on the team store: where, the cause in plain
    words, the server's own first line (scrubbed). A :class:`StoreError` is returned as
    it is."""
    if isinstance(error, StoreError):
        return error
    kind = failure_kind(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    cause = _CAUSE.get(kind)
    said = f"{cause} ({scrub(text)})" if cause else f"{type(error).__name__}: {scrub(text)}"
    return StoreError(f"cannot use {label}: {said}", kind=kind)


def register_plain_numbers(conn: psycopg.Connection[Any]) -> None:
    """``numeric`` values as ``int`` or ``float``, as SQLite gives them."""
    from psycopg.adapt import Loader

    class PlainNumberLoader(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:  # a fraction, an exponent, NaN or Infinity
                return float(text)

    conn.adapters.register_loader("numeric", PlainNumberLoader)
