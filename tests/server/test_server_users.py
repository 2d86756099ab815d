"""The sessions API serves its user's sessions only (server/owner.py): a real jupyter
server running for hub user ``alice`` over a SQLite file that ``bob``'s kernel writes too.
Every route answers bob's session exactly as a missing one (``not_found``), an id prefix
only matches alice's sessions, and the listing's total and the search's limit count
alice's sessions alone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.server.shapes import SearchJSON, SessionListJSON
from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.records import append_message

from .api_server import ApiServer
from .conftest import add_session, error, shaped

pytestmark = pytest.mark.slow
UNKNOWN = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def alices_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(tmp_path_factory.mktemp("alices-server"))
    server.env["JUPYTERHUB_USER"] = "alice"  # a hub's single-user server for alice
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(alices_server: ApiServer) -> Iterator[httpx.Client]:
    with alices_server.client() as client:
        yield client


@contextmanager
def kernel_of(server: ApiServer, name: str) -> Iterator[SessionStore]:
    """The server's database opened as ``name``'s kernel opens it."""
    before = os.environ.get("JUPYTERHUB_USER")
    os.environ["JUPYTERHUB_USER"] = name
    try:
        with SessionStore(server.db_path) as store:
            yield store
    finally:
        if before is None:
            del os.environ["JUPYTERHUB_USER"]
        else:
            os.environ["JUPYTERHUB_USER"] = before


def rows(path: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(sql, args).fetchall()


def test_another_users_session_is_not_found_on_every_route(
    alices_server: ApiServer, api: httpx.Client
) -> None:
    with kernel_of(alices_server, "bob") as bob:
        bobs = add_session(bob, "bob's thesis")
    with kernel_of(alices_server, "alice") as alice:
        alices = add_session(alice, "alice's homework")
    assert api.get(f"/sessions/{alices}").status_code == 200
    missing = error(api.get(f"/sessions/{UNKNOWN}"), 404, "not_found")
    for target in (bobs, bobs[:8]):
        said = error(api.get(f"/sessions/{target}"), 404, "not_found")
        assert said == missing.replace(UNKNOWN, target)  # word for word a missing id's line
        assert "bob" not in said
        for reply in (
            api.get(f"/sessions/{target}/messages"),
            api.get(f"/sessions/{target}/transcript"),
            api.get(f"/sessions/{target}/export?format=md"),
            api.post(f"/sessions/{target}/fork", json={}),
            api.patch(f"/sessions/{target}", json={"title": "taken over"}),
            api.delete(f"/sessions/{target}"),
        ):
            error(reply, 404, "not_found")
    assert rows(alices_server.db_path, "SELECT title FROM sessions WHERE id = ?", bobs) == [
        ("bob's thesis",)
    ]
    assert rows(alices_server.db_path, "SELECT count(*) FROM sessions WHERE parent_id = ?", bobs)[
        0
    ] == (0,)


def test_a_prefix_matches_only_the_users_own_sessions(
    alices_server: ApiServer, api: httpx.Client
) -> None:
    """Two sessions whose ids share a prefix, one each: the prefix is alice's one session,
    not an ambiguity that would list bob's id and title."""
    with kernel_of(alices_server, "bob") as bob:
        bobs = bob.create(title="bob's secret plan").id
    with kernel_of(alices_server, "alice") as alice:
        alices = alice.create(title="alice's").id
    for old, new in ((bobs, "feedface" + "0" * 24), (alices, "feedface" + "1" * 24)):
        rows(alices_server.db_path, "UPDATE sessions SET id = ? WHERE id = ?", new, old)
    found = api.get("/sessions/feedface")
    assert found.status_code == 200, found.text
    assert found.json()["title"] == "alice's"
    assert "secret" not in found.text


def test_the_listing_and_the_search_count_the_users_sessions(
    alices_server: ApiServer, api: httpx.Client
) -> None:
    with kernel_of(alices_server, "bob") as bob:
        for n in range(4):
            info = bob.create(title=f"bob {n}")
            for _ in range(10):
                append_message(bob.db, info.id, UserMessage(content="regression regression"))
    with kernel_of(alices_server, "alice") as alice:
        filler = " ".join(f"filler{n}" for n in range(40))
        mine = alice.create(title="alice's regression").id
        for n in range(3):
            append_message(alice.db, mine, UserMessage(content=f"regression {filler} {n}"))
        own = {info.id for info in alice.list(limit=None)}
    listed = shaped(SessionListJSON, api.get("/sessions?limit=500").json())
    assert {s["id"] for s in listed["sessions"]} == own
    assert listed["total"] == len(own)
    assert all(not s["title"].startswith("bob") for s in listed["sessions"])
    found = shaped(SearchJSON, api.get("/sessions?q=regression&limit=3").json())
    assert [hit["session_id"] for hit in found["hits"]] == [mine] * 3
    assert [s["id"] for s in found["sessions"]] == [mine]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the file to another uid needs root")
def test_sessions_from_before_users_show_to_the_files_owner_only(
    alices_server: ApiServer, api: httpx.Client
) -> None:
    with kernel_of(alices_server, "alice") as alice:
        old = alice.create(title="from schema 5").id
    rows(alices_server.db_path, "UPDATE sessions SET user_name = NULL WHERE id = ?", old)
    assert api.get(f"/sessions/{old}").status_code == 200  # the server's user owns the file
    path = alices_server.db_path
    os.chown(path, os.getuid() + 4242, -1)
    try:
        error(api.get(f"/sessions/{old}"), 404, "not_found")
        listed = shaped(SessionListJSON, api.get("/sessions?limit=500").json())
        assert old not in {s["id"] for s in listed["sessions"]}
    finally:
        os.chown(path, os.getuid(), -1)
