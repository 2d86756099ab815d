"""Which database a session store opens: the SQLite file, or the PostgreSQL team store.

One rule for every caller (the ``%agent`` magic, the sessions API, the lease keeper, a
user's own ``SessionStore(...)``): a ``postgresql://`` (or ``postgres://``) URL is the team
store; any other string or path is a SQLite file; nothing given is ``MIBYAN_DB_URL`` when it
is set, else the SQLite default (``MIBYAN_DB``, else the Jupyter data dir). PostgreSQL's
driver is an extra, imported only here and only for a URL, so ``%load_ext`` stays fast and
a SQLite user never needs it (docs/architecture.md, "The team store (PostgreSQL)").
"""

from __future__ import annotations

from pathlib import Path

from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.files import ENV_URL, TEAM_STORE_LABEL, StoreError, database_url

URL_SCHEMES = ("postgresql://", "postgres://")


def is_team_store(target: object) -> bool:
    """Whether ``target`` names the PostgreSQL team store (a URL, not a file)."""
    return isinstance(target, str) and target.lower().startswith(URL_SCHEMES)


def open_database(target: str | Path | None = None) -> StoreDatabase:
    """The database ``target`` names (see the module docstring), open and checked."""
    if target is None:
        target = database_url()
    if isinstance(target, str) and target.startswith(TEAM_STORE_LABEL):
        raise StoreError(  # a PgDatabase's path: it names the team store, it is not a file
            f"{target} is the team store's description, not a file: pass its URL "
            f"(c.AgentMagics.db_url or {ENV_URL}) or the open database itself"
        )
    if is_team_store(target):
        assert isinstance(target, str)
        from mibyan_jupyter.store.pg.connect import PgDatabase  # only for a URL

        try:
            return PgDatabase(target)
        except ImportError:  # psycopg missing: the extra is not installed
            raise StoreError(
                "the team store needs PostgreSQL's driver: pip install 'mibyan-jupyter[postgres]'"
            ) from None
    from mibyan_jupyter.store.db import Database

    return Database(target)
