"""Loading the server extension: its configuration and its routes.

``MibyanServer`` is the extension's configurable (``c.MibyanServer.db_path`` and
``lock_wait`` in a ``jupyter_server_config`` file, or ``--MibyanServer.db_path=...``); without it the
server uses the database the kernels use (``MIBYAN_DB``, else the default in the Jupyter
data dir), so the panel shows the sessions the notebooks write. The database itself is
opened on the first request (:mod:`.service`), so loading costs no I/O.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from traitlets import Float, Unicode
from traitlets.config import Configurable

from mibyan_jupyter.server.handlers import WORK_MODULES, routes
from mibyan_jupyter.server.service import LOCK_WAIT_S, StoreService


class MibyanServer(Configurable):
    """The sessions API's settings."""

    db_path = Unicode(
        "",
        help="The session database the sessions API serves. Empty: the kernels' database "
        "(MIBYAN_DB, else <jupyter data dir>/mibyan/sessions.sqlite3).",
    ).tag(config=True)
    lock_wait = Float(
        LOCK_WAIT_S,
        min=0.0,
        help="Seconds a change waits for another process's write lock on the database "
        "before it answers a 'store' error.",
    ).tag(config=True)


def load(serverapp: Any) -> StoreService:
    """Register the routes on ``serverapp``'s web app; returns the store service."""
    settings = MibyanServer(parent=serverapp)
    service = StoreService(settings.db_path or None, lock_wait=settings.lock_wait)
    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", routes(base_url, service))

    def announce(done: Future[str]) -> None:
        if done.exception() is None:
            where = done.result()
            serverapp.log.info(
                "mibyan-jupyter: sessions API at %smibyan/api/ (store: %s)", base_url, where
            )
        else:
            serverapp.log.error(
                "mibyan-jupyter: the sessions API cannot load: %s", done.exception()
            )

    service.warm(WORK_MODULES).add_done_callback(announce)
    return service
