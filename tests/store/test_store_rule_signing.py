"""Saved "always" rules are signed (migration 0004): a row that neither an approval's
"always" nor a ``%agent policy`` cell wrote is ignored and flagged, whoever put it there
(code with sqlite3, a database copied from another user, a row from before schema 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.approval_rules import RuleWriteRefused, rule_key_path
from mibyan_jupyter.store.db import Database, migrations


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "keys" / "rule-key"
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(key))
    return key


def _insert(db_path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute(sql, params)


def test_a_saved_rule_is_signed_and_applies(tmp_path: Path, own_key: Path) -> None:
    with SessionStore(tmp_path / "s.sqlite3") as store:
        store.approval_rules.save("run_python", True, origin="cell")
        store.save_always_rule("write_file", False)  # an approval's "always" answer
        assert store.always_rules() == {"run_python": True, "write_file": False}
        origins = {rule.tool: rule.origin for rule in store.approval_rules.rows()}
    assert origins == {"run_python": "cell", "write_file": "approval"}
    assert rule_key_path() == own_key
    assert own_key.stat().st_mode & 0o777 == 0o600, "the key is the user's alone"


def test_a_row_inserted_with_sqlite_is_ignored_and_flagged(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with SessionStore(path) as store:
        store.approval_rules.save("read_file", True, origin="cell")
    _insert(
        path,
        "INSERT INTO approval_rules (tool, approved, created_at, origin, mac)"
        " VALUES ('run_shell', 1, 1.0, 'cell', 'f00d')",
    )
    _insert(path, "INSERT INTO approval_rules (tool, approved, created_at) VALUES ('x', 1, 2.0)")
    with SessionStore(path) as store:
        assert store.always_rules() == {"read_file": True}
        assert sorted(rule.tool for rule in store.approval_rules.untrusted()) == ["run_shell", "x"]
    with sqlite3.connect(path) as conn:
        flagged = dict(conn.execute("SELECT tool, flagged_at FROM approval_rules").fetchall())
    assert flagged["read_file"] is None
    assert None not in (flagged["run_shell"], flagged["x"])


def test_a_signed_deny_turned_into_allow_no_longer_verifies(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with SessionStore(path) as store:
        store.approval_rules.save("run_shell", False, origin="cell")
    _insert(path, "UPDATE approval_rules SET approved = 1 WHERE tool = 'run_shell'")
    with SessionStore(path) as store:
        assert store.always_rules() == {}
        (ignored,) = store.approval_rules.untrusted()
    assert (ignored.tool, ignored.approved) == ("run_shell", True)


def test_a_database_from_another_user_grants_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "shared.sqlite3"
    with SessionStore(path) as store:
        store.approval_rules.save("run_shell", True, origin="cell")
    monkeypatch.setenv("MIBYAN_RULE_KEY", str(tmp_path / "other-user" / "rule-key"))
    with SessionStore(path) as store:
        assert store.always_rules() == {}
        store.approval_rules.save("read_file", True, origin="cell")  # the new key signs it
        assert store.always_rules() == {"read_file": True}


def test_a_refused_write_changes_nothing(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.sqlite3") as store:
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
