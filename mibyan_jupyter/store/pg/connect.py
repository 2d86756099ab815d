"""Connecting a kernel to the PostgreSQL team store: where the URL comes from, which
credentials are accepted, which roles are refused, and the pool.

Why each rule (docs/architecture.md, "Store"; issue 14's threat model):

* The URL is ``c.AgentMagics.db_url``, else ``MIBYAN_DB_URL``. It names the server and the
  database, never a secret: a URL holding a password is refused with one line saying where
  credentials go (``PGPASSWORD``, ``~/.pgpass``/``PGPASSFILE``, ``PGSERVICE``), so a
  password is never stored in a notebook, a config file or a session's settings.
* No password is ever shown: errors from libpq or psycopg are scrubbed (:func:`scrub`) and
  raised as a fresh :class:`StoreError` outside the ``except`` block, so no traceback
  carries the original; the pool's log records pass through the same scrubbing.
* Row-level security is the privacy guarantee, and a superuser, a role with BYPASSRLS, a
  member of the tables' owner role or an admin would see every user's rows: such a role
  is refused at connect with one line. The role must be a member of ``mibyan_app``.
* One small pool per kernel: at least 1 and at most 3 connections (the writer's lane, the
  lease heartbeat, one read), so 20 kernels hold at most 60 of PostgreSQL's default 100
  ``max_connections`` (3 reserved for superusers), leaving room for the Jupyter server's
  own store and the admin.
* Durability is PostgreSQL's default (``synchronous_commit = on``, never lowered here):
  each finished message is committed in its own transaction (:meth:`PgDatabase.transaction`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.store.dialect import POSTGRES, Dialect
from mibyan_jupyter.store.files import ENV_URL as ENV_URL
from mibyan_jupyter.store.files import TEAM_STORE_LABEL, StoreError
from mibyan_jupyter.store.files import database_url as database_url
from mibyan_jupyter.store.pg.schema import ADMIN_ROLE, APP_ROLE, LATEST, OWNER_ROLE, SCHEMA
from mibyan_jupyter.store.pg.scrub import scrub

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from mibyan_jupyter.store.pg.conn import PgConn, Rows

POOL_MIN = 1
POOL_MAX = 3
WHERE_CREDENTIALS_GO = (
    "put the password in PGPASSWORD, in ~/.pgpass (or the file PGPASSFILE names), "
    "or in a libpq service file (PGSERVICE)"
)


def parse_url(url: str) -> dict[str, str]:
    """The URL's connection parameters; refuses one holding a password, and one that does
    not parse (without repeating its text, which might hold one)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {key: str(value) for key, value in conninfo_to_dict(url).items()}
    except Exception:
        params = None
    if params is None:
        raise StoreError(
            "the team store's URL is not a PostgreSQL URL or conninfo string "
            "(its text is not shown: it may hold a password)"
        )
    if "password" in params:
        raise StoreError(
            f"the team store's URL holds a password, which would be saved with the settings: "
            f"remove it and {WHERE_CREDENTIALS_GO}"
        )
    return params


def describe(params: Mapping[str, str]) -> str:
    """The server, database and user a URL names, for error lines (never a secret)."""
    keys = ("service", "host", "port", "dbname", "user")
    shown = [f"{key}={params[key]}" for key in keys if params.get(key)]
    return " ".join(shown) or "the default server"


def _fail(params: Mapping[str, str], error: BaseException) -> StoreError:
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return StoreError(f"cannot use the team store ({describe(params)}): {scrub(first)}")


_ROLE_CHECK = """
SELECT r.rolname, r.rolsuper, r.rolbypassrls,
       pg_has_role(current_user, %(owner)s, 'MEMBER'),
       pg_has_role(current_user, %(app)s, 'MEMBER'),
       pg_has_role(current_user, %(admin)s, 'MEMBER'),
       EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %(schema)s AND pg_has_role(current_user, c.relowner, 'MEMBER'))
FROM pg_roles r WHERE r.rolname = current_user
"""


def check_role(conn: psycopg.Connection[Any]) -> None:
    """Refuse a role that would bypass row-level security, or that is no mibyan user, or a
    database whose schema is not this version's (one line each, saying what to do)."""
    from mibyan_jupyter.store.pg.schema import schema_version

    missing = conn.execute(
        "SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s, %s)",
        (OWNER_ROLE, APP_ROLE, ADMIN_ROLE),
    ).fetchone()
    if not missing or missing[0] != 3:
        raise StoreError(
            "this database has no mibyan roles yet: an admin runs `mibyan-admin pg migrate`"
        )
    names = {"owner": OWNER_ROLE, "app": APP_ROLE, "admin": ADMIN_ROLE, "schema": SCHEMA}
    row = conn.execute(_ROLE_CHECK, names).fetchone()
    assert row is not None
    role, superuser, bypass, owner, app, admin, owns = row
    why = (
        "is a superuser" if superuser
        else "has BYPASSRLS" if bypass
        else f"is a member of {OWNER_ROLE}, which owns the tables" if owner or owns
        else f"is a member of {ADMIN_ROLE}" if admin
        else None
    )  # fmt: skip
    if why:
        raise StoreError(
            f"refusing to use the team store as role {role}: it {why}, so row-level security "
            "would not apply; connect as the user's own role (mibyan-admin pg add-user)"
        )
    if not app:
        raise StoreError(
            f"role {role} is not a mibyan user: an admin runs `mibyan-admin pg add-user {role}`"
        )
    version = schema_version(conn)
    if version is None or version < LATEST:
        raise StoreError(
            f"the team store has schema {version or 0}, this version needs {LATEST}: "
            "an admin runs `mibyan-admin pg migrate`"
        )
    if version > LATEST:
        raise StoreError(
            f"the team store has schema {version}, newer than this mibyan-jupyter knows "
            f"({LATEST}): upgrade the package"
        )


class _ScrubFilter(logging.Filter):
    """Passwords out of the pool's log records (its warnings quote connection errors)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        return True


_POOL_LOGGER = logging.getLogger("psycopg.pool")
if not any(isinstance(f, _ScrubFilter) for f in _POOL_LOGGER.filters):
    _POOL_LOGGER.addFilter(_ScrubFilter())


def _configure(conn: psycopg.Connection[Any]) -> None:
    from mibyan_jupyter.store.pg.conn import register_plain_numbers

    conn.execute(f"SET search_path = {SCHEMA}, pg_catalog")
    # A kernel frozen inside a transaction (SIGSTOP, a suspended VM) must not hold a
    # session row locked for good: the server ends it after 30 s, and a writer waiting on
    # a lock gives up after 10 s with "locked", which its lane keeps and retries.
    conn.execute("SET lock_timeout = '10s'")
    conn.execute("SET idle_in_transaction_session_timeout = '30s'")
    register_plain_numbers(conn)


class PgDatabase:
    """A kernel's connection pool to the team store, checked at open (see the module
    docstring); the same face as the SQLite :class:`~..db.Database` (store/conn.py).
    Connections are in autocommit mode; :meth:`transaction` is the one way to write, one
    transaction per finished message."""

    dialect: Dialect = POSTGRES
    sees_legacy = False
    """Every row has a user on PostgreSQL (``DEFAULT current_user``)."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.params = parse_url(url)
        self.url = url
        self.path = f"{TEAM_STORE_LABEL}{describe(self.params)})"
        """For messages, like the SQLite file's path (never a secret)."""
        self._local = threading.local()
        self.user = ""
        """The login role: whose rows these are (the database's word, not the environment's)."""
        self.pool = self._open(url, timeout)

    def _open(self, url: str, timeout: float) -> ConnectionPool[Any]:
        import psycopg
        from psycopg_pool import ConnectionPool

        failure: StoreError | None = None
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=round(timeout)) as first:
                check_role(first)
                row = first.execute("SELECT current_user").fetchone()
                self.user = str(row[0]) if row else ""
        except StoreError as refused:
            failure = refused
        except psycopg.Error as error:
            failure = _fail(self.params, error)
        if failure is not None:  # raised here, so no traceback holds psycopg's error
            raise failure
        pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=POOL_MIN,
            max_size=POOL_MAX,
            kwargs={"autocommit": True, "connect_timeout": round(timeout)},
            configure=_configure,
            timeout=timeout,
            name="mibyan-store",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except Exception as error:
            failure = _fail(self.params, error)
        if failure is not None:
            pool.close()
            raise failure
        return pool

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConn]:
        """One transaction on a pooled connection: committed when the block ends, rolled
        back when it raises; a failure of PostgreSQL's is one :class:`StoreError` line
        (store/pg/conn.py). Inside it, :attr:`conn` on this thread is this transaction
        (as on SQLite, where the one connection is), and a nested call is a savepoint."""
        from mibyan_jupyter.store.pg.conn import PgConn, pg_failure

        held: PgConn | None = getattr(self._local, "conn", None)
        if held is not None:
            with held.raw.transaction():
                yield held
            return
        failure: StoreError | None = None
        try:
            with self.pool.connection() as raw, raw.transaction():
                conn = PgConn(raw, self.path)
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except StoreError:
            raise
        except Exception as error:
            if not _is_database_error(error):
                raise
            failure = pg_failure(self.path, error)
        if failure is not None:
            raise failure

    @property
    def conn(self) -> PgConn | _Reader:
        """The transaction this thread holds, else a reader that borrows a connection
        from the pool for each statement."""
        held: PgConn | None = getattr(self._local, "conn", None)
        return held if held is not None else _Reader(self)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> PgDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_database_error(error: BaseException) -> bool:
    import psycopg
    from psycopg_pool import PoolClosed, PoolTimeout

    return isinstance(error, (psycopg.Error, PoolClosed, PoolTimeout))


class _Reader:
    """Statements outside any transaction, each on a connection borrowed for it."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    def execute(self, sql: str, parameters: Any = (), /) -> Rows:
        from mibyan_jupyter.store.pg.conn import pg_failure, run

        failure: StoreError | None = None
        try:
            with self._db.pool.connection() as raw:
                return run(raw, sql, parameters)
        except Exception as error:
            if not _is_database_error(error):
                raise
            failure = pg_failure(self._db.path, error)
        raise failure

    def executemany(self, sql: str, parameters: Any, /) -> Rows:
        with self._db.transaction() as conn:
            return conn.executemany(sql, parameters)
