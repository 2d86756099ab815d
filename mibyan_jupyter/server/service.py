"""The server's one session store, opened lazily and used on a thread of its own.

Why one thread: SQLite calls block, and jupyter_server serves every user's requests on one
event loop, so no store call may run there; and one connection used from one thread needs
no locking of ours, while requests queue in order behind each other (each one takes
milliseconds: docs/architecture.md, "The sessions API"). Why lazily: a server that never
shows the panel never opens the database, and a database that cannot be opened (corrupt,
locked, read-only, a newer schema) fails the request that needed it with one clear line
(code ``store``), not the server's start; the next request tries again, so a file the
user fixed is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mibyan_jupyter.server.errors import ApiError, translate

if TYPE_CHECKING:
    from mibyan_jupyter.store.sessions import SessionStore

T = TypeVar("T")
_log = logging.getLogger(__name__)

LOCK_WAIT_S = 5.0
"""How long a write waits out another process's lock before it answers ``store``
(``c.MibyanServer.lock_wait``): a kernel holds the write lock for milliseconds, and a
request should not hang for the store's default 30 s."""


class StoreService:
    """Runs work on the server's store, off the event loop. ``path`` ``None``: the store
    the kernels use (``MIBYAN_DB_URL``, the team store; else ``MIBYAN_DB``, else the
    default file in the Jupyter data dir). A ``postgresql://`` URL is the team store, as
    the login role the URL names (the hub user's: row-level security decides what the
    panel lists; docs/architecture.md, "The team store (PostgreSQL)")."""

    def __init__(self, path: str | Path | None = None, *, lock_wait: float = LOCK_WAIT_S) -> None:
        from mibyan_jupyter.store.backend import is_team_store
        from mibyan_jupyter.store.files import database_url

        self.url = str(path) if is_team_store(path) else None if path else database_url()
        """The team store's URL (never a password: connect refuses one), else ``None``."""
        self.path = Path(path).expanduser() if path and self.url is None else None
        self.lock_wait = lock_wait
        self._store: SessionStore | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibyan-store")
        self._lock = threading.Lock()

    async def call(self, work: Callable[[SessionStore], T]) -> T:
        """``work(store)`` on the store's thread; its failure as an :class:`ApiError`."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, work)

    def warm(self, modules: Sequence[str]) -> Future[str]:
        """Import ``modules`` on the store's thread now (the store, the core and export/
        take ~0.3 s to import), so the server's start does not wait for them and the
        first request does not either; the future's result is the database's path."""

        def imports() -> str:
            for name in modules:
                importlib.import_module(name)
            from mibyan_jupyter.store.files import default_path
            from mibyan_jupyter.store.pg.scrub import scrub

            return scrub(self.url) if self.url else str(self.path or default_path())

        return self._executor.submit(imports)

    def _run(self, work: Callable[[SessionStore], T]) -> T:
        import sqlite3

        from mibyan_jupyter.store.files import StoreError

        try:
            return work(self._open())
        except ApiError:
            raise
        except (StoreError, sqlite3.Error) as error:
            if not _is_lookup(error):
                self._drop()  # reopen next time: the file may be fixed (or replaced)
            raise translate(error) from None
        except Exception as error:
            _log.exception("the sessions API failed")
            raise translate(error) from None

    def _open(self) -> SessionStore:
        """The store, scoped to the server's user (:mod:`.owner`)."""
        from mibyan_jupyter.server.owner import OwnSessions
        from mibyan_jupyter.store.backend import open_database
        from mibyan_jupyter.store.conn import StoreDatabase
        from mibyan_jupyter.store.db import Database

        with self._lock:
            if self._store is None:
                db: StoreDatabase
                if self.url is not None:
                    db = open_database(self.url)
                else:
                    db = Database(
                        self.path,
                        busy_timeout=min(2.0, self.lock_wait),
                        lock_retry_seconds=self.lock_wait,
                    )
                self._store = OwnSessions(db)
            return self._store

    def _drop(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.db.close()

    def close(self) -> None:
        """Close the database once the queued work is done (the server is stopping)."""
        self._executor.shutdown(wait=True)
        self._drop()


def _is_lookup(error: Exception) -> bool:
    """A failure that says nothing about the database (no such session, a prefix that
    names several): the connection stays open."""
    from mibyan_jupyter.store.session_queries import AmbiguousSessionError, SessionNotFoundError

    return isinstance(error, SessionNotFoundError | AmbiguousSessionError)
