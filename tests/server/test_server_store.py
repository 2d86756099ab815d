"""The sessions API over a database that cannot be used: one JSON error line (code
``store``), never a traceback, and the API recovers once the file is fixed. The server
here is given its database by ``--MibyanServer.db_path`` (not ``MIBYAN_DB``) and a short
``--MibyanServer.lock_wait``."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mibyan_jupyter.server.shapes import SessionListJSON
from mibyan_jupyter.store import SessionStore

from .api_server import ApiServer
from .conftest import add_session, error, shaped, start_server

pytestmark = pytest.mark.slow
LOCK_WAIT_S = 0.3


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    base = tmp_path_factory.mktemp("configured-db")
    flags = (
        f"--MibyanServer.db_path={base / 'chosen.sqlite3'}",
        f"--MibyanServer.lock_wait={LOCK_WAIT_S}",
    )
    yield from start_server(tmp_path_factory, "store-errors", extra=flags)


def chosen(server: ApiServer) -> Path:
    return Path(server.extra[0].split("=", 1)[1])


def test_a_corrupt_database_is_one_error_line_until_it_is_fixed(configured: ApiServer) -> None:
    path = chosen(configured)
    path.write_bytes(b"this is not a database\n" * 200)  # before the server's first request
    with configured.client() as api:
        for route in ("/sessions", "/sessions?q=anything", "/sessions/0123456789abcdef"):
            message = error(api.get(route), 500, "store")
            assert str(path) in message
            assert "not a SQLite database" in message
        assert path.read_bytes() == b"this is not a database\n" * 200  # left untouched
        path.unlink()
        listed = shaped(SessionListJSON, api.get("/sessions").json())
    assert listed == {"sessions": [], "total": 0}
    assert path.exists()
    assert not configured.db_path.exists()  # the configured path wins over MIBYAN_DB
    assert "Traceback" not in configured.log()


def test_a_locked_database_fails_a_change_but_not_a_read(configured: ApiServer) -> None:
    with SessionStore(chosen(configured)) as store:
        session = add_session(store, "before the lock")
    holder = sqlite3.connect(chosen(configured), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with configured.client() as api:
            assert api.get(f"/sessions/{session}").status_code == 200  # WAL: reads go on
            started = time.monotonic()
            reply = api.patch(f"/sessions/{session}", json={"title": "during the lock"})
            waited = time.monotonic() - started
            assert "locked" in error(reply, 500, "store")
            assert waited < LOCK_WAIT_S + 5
            holder.execute("ROLLBACK")
            renamed = api.patch(f"/sessions/{session}", json={"title": "after the lock"})
            assert renamed.status_code == 200, renamed.text
    finally:
        holder.close()
    assert "Traceback" not in configured.log()


def test_an_unreachable_route_is_still_json(configured: ApiServer) -> None:
    with httpx.Client(base_url=configured.url, headers=configured.auth(), timeout=30) as raw:
        reply = raw.put("/mibyan/api/sessions")  # no such method
    error(reply, 405, "bad_request")
