"""``mibyan-admin pg sync-roster``: the team store's roster made equal to the admin policy's
``[courses]``, and row-level security following it, against a real PostgreSQL.

The policy file is root-owned in the test's folder (the tests run as root) and reaches the
command the one way the environment may: ``MIBYAN_POLICY`` adds it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgTestDb
from policy_support import write_policy

from mibyan_jupyter import admin

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a trusted policy file is root's")


def use_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "policy.toml"
    write_policy(path, text)
    monkeypatch.setenv("MIBYAN_POLICY", str(path))


def members(conn: Any) -> set[tuple[str, str, str]]:
    rows = conn.execute("SELECT course, user_name, role FROM mibyan.course_members")
    return {(str(c), str(u), str(r)) for c, u, r in rows}


def sync(pg_db: PgTestDb, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    code = admin.main(["pg", "sync-roster", "--db", pg_db.url("mibyan"), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.splitlines()


def test_the_roster_follows_the_policy_and_row_security_follows_the_roster(
    pg_db: PgTestDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, carol = pg_db.user("alice"), pg_db.user("carol")  # login roles, in no course yet
    student = pg_db.connect_as(alice)
    student.execute(
        "INSERT INTO mibyan.sessions (id, title, created_at, updated_at)"
        " VALUES ('s-alice', 'homework', 1, 1)"
    )
    teacher = pg_db.connect_as(carol)
    seen = "SELECT id FROM mibyan.sessions"
    assert teacher.execute(seen).fetchall() == []  # not her student yet
    use_policy(
        tmp_path,
        monkeypatch,
        f'[courses.ds101]\ninstructors = ["{carol.name}"]\n'
        f'students = ["{alice.name}", "zed_{pg_db.suffix}", "{carol.name}"]\n',
    )
    assert sync(pg_db, capsys, "--dry-run")[0].startswith("(dry run, nothing changed) course ds101")
    assert members(pg_db.admin()) == set()
    lines = sync(pg_db, capsys)
    assert lines[0] == "course ds101: 1 instructor(s), 2 student(s); 3 added or changed, 0 removed"
    assert lines[-1].startswith(f"no login role yet for: zed_{pg_db.suffix}")
    assert members(pg_db.admin()) == {
        ("ds101", alice.name, "student"),
        ("ds101", carol.name, "instructor"),  # listed as both: an instructor
        ("ds101", f"zed_{pg_db.suffix}", "student"),
    }
    assert teacher.execute(seen).fetchall() == [("s-alice",)]  # RLS reads the new roster
    use_policy(tmp_path, monkeypatch, f'[courses.ds101]\ninstructors = ["{carol.name}"]\n')
    assert sync(pg_db, capsys)[0].endswith("0 added or changed, 2 removed")
    assert members(pg_db.admin()) == {("ds101", carol.name, "instructor")}
    assert teacher.execute(seen).fetchall() == []  # removed from the course: unseen again
    assert sync(pg_db, capsys)[0].endswith("0 added or changed, 0 removed")  # idempotent


def test_a_course_the_policy_does_not_name_is_left_alone(
    pg_db: PgTestDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bob = pg_db.user("bob", "ml202")  # add-user's own roster row
    use_policy(tmp_path, monkeypatch, "[courses.ds101]\ninstructors = []\n")
    lines = sync(pg_db, capsys)
    assert "not in the policy, left as they are: ml202" in lines
    assert ("ml202", bob.name, "student") in members(pg_db.admin())


def test_without_a_trusted_policy_nothing_is_synced(
    pg_db: PgTestDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pg_db.user("bob", "ml202")
    use_policy(tmp_path, monkeypatch, "[courses.ds101]\n")
    (tmp_path / "policy.toml").chmod(0o666)  # a file others could write is never trusted
    assert admin.main(["pg", "sync-roster", "--db", pg_db.url("mibyan")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("mibyan-admin: the admin policy cannot be used:")
    assert members(pg_db.admin()) != set()  # ml202's row is untouched
