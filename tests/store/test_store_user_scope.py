"""Two users' sessions in one SQLite file: each search, listing and lookup by id sees only
the user's own (store/scope.py), and the search's limit counts the user's hits, not the
file's. Each user opens the file the way their kernel does, with ``JUPYTERHUB_USER`` set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.records import append_message
from mibyan_jupyter.store.search import search
from mibyan_jupyter.store.session_queries import SessionNotFoundError


@contextmanager
def as_user(path: Path, name: str) -> Iterator[SessionStore]:
    """The store at ``path`` opened by ``name``'s kernel (and searched while it is open)."""
    before = os.environ.get("JUPYTERHUB_USER")
    os.environ["JUPYTERHUB_USER"] = name
    try:
        with SessionStore(path) as store:
            yield store
    finally:
        if before is None:
            del os.environ["JUPYTERHUB_USER"]
        else:
            os.environ["JUPYTERHUB_USER"] = before


def session(store: SessionStore, title: str, texts: list[str]) -> str:
    info = store.create(title=title, model="demo:scripted")
    for text in texts:
        append_message(store.db, info.id, UserMessage(content=text))
    return info.id


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, str, str]:
    """One file: bob's session ranks above alice's for "pandas" (30 short, dense hits),
    alice's has 3 hits buried in longer messages."""
    path = tmp_path / "shared.sqlite3"
    with as_user(path, "bob") as bob:
        bobs = session(bob, "bob's", ["pandas pandas pandas"] * 30)
    with as_user(path, "alice") as alice:
        filler = " ".join(f"word{n}" for n in range(40))
        alices = session(alice, "alice's", [f"pandas and {filler} {n}" for n in range(3)])
    return path, alices, bobs


def test_each_user_searches_only_their_own_sessions(shared: tuple[Path, str, str]) -> None:
    path, alices, bobs = shared
    with as_user(path, "alice") as alice:
        hits = search(alice, "pandas", limit=3)
        assert [hit.session_id for hit in hits] == [alices] * 3  # the limit counts her hits
        assert search(alice, "pandas", limit=50, session_id=bobs) == []
    with as_user(path, "bob") as bob:
        hits = search(bob, "pandas", limit=50)
        assert {hit.session_id for hit in hits} == {bobs}
        assert len(hits) == 30
        assert search(bob.db, "word7", limit=50) == []  # a Database is searched the same way
    with as_user(path, "carol") as carol:
        assert search(carol, "pandas") == []


def test_listing_and_lookup_by_id_are_the_users_own(shared: tuple[Path, str, str]) -> None:
    path, alices, bobs = shared
    with as_user(path, "alice") as alice:
        assert [info.id for info in alice.list()] == [alices]
        assert alice.resolve("last") is not None
        with pytest.raises(SessionNotFoundError):
            alice.resolve(bobs[:8])


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the file to another uid needs root")
def test_sessions_from_before_users_are_the_file_owners(
    shared: tuple[Path, str, str],
) -> None:
    """A session with no user (schema 5 and older) is seen by whoever owns the file only."""
    path, alices, _ = shared
    with as_user(path, "alice") as alice:
        old = session(alice, "older", ["pandas from before the users"])
        alice.db.conn.execute("UPDATE sessions SET user_name = NULL WHERE id = ?", (old,))
        assert {hit.session_id for hit in search(alice, "pandas", limit=50)} == {alices, old}
        os.chown(path, os.getuid() + 4242, -1)  # the file is someone else's now
        try:
            assert {hit.session_id for hit in search(alice, "pandas", limit=50)} == {alices}
            assert [info.id for info in alice.list()] == [alices]
        finally:
            os.chown(path, os.getuid(), -1)
