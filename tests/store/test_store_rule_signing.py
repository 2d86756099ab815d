"""Saved "always" rules are signed (migration 0004): a row that neither an approval's
"always" nor a ``%agent policy`` cell wrote is ignored and flagged, whoever put it there
(code with sqlite3 or psql, a database copied from another user, a row from before schema 4).
On the team store each user's rules are their own rows (migration 0006)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_backend import Backend

from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.approval_rules import RuleWriteRefused, rule_key_path
from mibyan_jupyter.store.db import Database, migrations


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "keys" / "rule-key"
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(key))
    return key


def _insert(backend: Backend, sql: str) -> None:
    """``sql`` run around the store: sqlite3 on the file, or the user's own psql session."""
    if backend.pg is None:
        with sqlite3.connect(backend.target) as conn:
            conn.execute(sql)
        return
    assert backend.pg_user is not None
    conn = backend.pg.connect_as(backend.pg_user)
    conn.execute("SET search_path = mibyan")
    conn.execute(sql)


def _flags(backend: Backend) -> dict[str, float | None]:
    with SessionStore(backend.target) as store:
        rows = store.db.conn.execute("SELECT tool, flagged_at FROM approval_rules").fetchall()
    return {tool: flagged for tool, flagged in rows}


def test_a_saved_rule_is_signed_and_applies(backend: Backend, own_key: Path) -> None:
    with backend.store() as store:
        store.approval_rules.save("run_python", True, origin="cell")
        store.save_always_rule("write_file", False)  # an approval's "always" answer
        assert store.always_rules() == {"run_python": True, "write_file": False}
        origins = {rule.tool: rule.origin for rule in store.approval_rules.rows()}
    assert origins == {"run_python": "cell", "write_file": "approval"}
    assert rule_key_path() == own_key
    assert own_key.stat().st_mode & 0o777 == 0o600, "the key is the user's alone"


def test_a_row_inserted_with_sqlite_is_ignored_and_flagged(backend: Backend) -> None:
    with backend.store() as store:
        store.approval_rules.save("read_file", True, origin="cell")
    _insert(
        backend,
        "INSERT INTO approval_rules (tool, approved, created_at, origin, mac)"
        " VALUES ('run_shell', 1, 1.0, 'cell', 'f00d')",
    )
    _insert(backend, "INSERT INTO approval_rules (tool, approved, created_at) VALUES ('x', 1, 2.0)")
    with backend.store() as store:
        assert store.always_rules() == {"read_file": True}
        assert sorted(rule.tool for rule in store.approval_rules.untrusted()) == ["run_shell", "x"]
    flagged = _flags(backend)
    assert flagged["read_file"] is None
    assert None not in (flagged["run_shell"], flagged["x"])


def test_a_signed_deny_turned_into_allow_no_longer_verifies(backend: Backend) -> None:
    with backend.store() as store:
        store.approval_rules.save("run_shell", False, origin="cell")
    _insert(backend, "UPDATE approval_rules SET approved = 1 WHERE tool = 'run_shell'")
    with backend.store() as store:
        assert store.always_rules() == {}
        (ignored,) = store.approval_rules.untrusted()
    assert (ignored.tool, ignored.approved) == ("run_shell", True)


def test_a_database_from_another_user_grants_nothing(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with backend.store() as store:
        store.approval_rules.save("run_shell", True, origin="cell")
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(tmp_path / "other-user" / "rule-key"))
    with backend.store() as store:
        assert store.always_rules() == {}
        store.approval_rules.save("read_file", True, origin="cell")  # the new key signs it
        assert store.always_rules() == {"read_file": True}


def test_a_refused_write_changes_nothing(backend: Backend) -> None:
    with backend.store() as store:
        store.approval_rules.save("run_shell", False, origin="cell")
        store.approval_rules.write_check = lambda: "the call comes from code an agent ran"
        with pytest.raises(RuleWriteRefused, match="code an agent ran"):
            store.save_always_rule("run_shell", True)
        with pytest.raises(RuleWriteRefused):
            store.forget_always_rule("run_shell")
        assert store.always_rules() == {"run_shell": False}


def test_rules_saved_before_schema_4_are_ignored_after_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:  # schema 3, with a rule row as schema 3 wrote it
        for number, _name, sql in migrations()[:3]:
            conn.executescript(sql)
            conn.execute(f"PRAGMA user_version={number}")
        conn.execute("INSERT INTO approval_rules VALUES ('run_shell', 1, 1.0)")
    with Database(path) as db:
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] >= 4  # and the later ones
    with SessionStore(path) as store:
        assert store.always_rules() == {}
        assert [rule.origin for rule in store.approval_rules.untrusted()] == [None]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # only the team store has it
def test_on_the_team_store_each_user_keeps_their_own_rules(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same tool, two users, opposite answers: two rows (the key is the user and the
    tool), each signed by its user's key and seen by its user alone."""
    with backend.store() as store:
        store.approval_rules.save("run_shell", True, origin="cell")
        store.approval_rules.save("run_shell", False, origin="cell")  # replaces the user's own
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(tmp_path / "bob" / "rule-key"))
    with SessionStore(backend.as_user("bob")) as bob:
        assert bob.always_rules() == {}
        bob.approval_rules.save("run_shell", True, origin="approval")
        assert bob.always_rules() == {"run_shell": True}
        assert bob.forget_always_rule("read_file") is False
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(tmp_path / "keys" / "rule-key"))
    with backend.store() as store:
        assert store.always_rules() == {"run_shell": False}
        assert store.forget_always_rule("run_shell") is True
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(tmp_path / "bob" / "rule-key"))
    with SessionStore(backend.as_user("bob")) as bob:
        assert bob.always_rules() == {"run_shell": True}
