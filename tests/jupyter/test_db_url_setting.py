"""``c.AgentMagics.db_url`` / ``MIBYAN_DB_URL``: a URL holding a password is
refused when it is set (it would be kept in the user's config), and a configured team store
holds the kernel's sessions (docs/architecture.md, "The team store (PostgreSQL)")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from pg_server import PgTestDb
from policy_support import write_policy

from mibyan_jupyter.jupyter.state import kernel_state


def test_a_url_with_a_password_is_refused_without_echoing_it(
    loaded_shell: InteractiveShell, caplog: pytest.LogCaptureFixture
) -> None:
    """``%config`` reports a refused value as one logged error and keeps the old one."""
    loaded_shell.run_cell("%config AgentMagics.db_url = 'postgresql://alice:hunter2@db/course'")
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "PGPASSWORD" in said
    assert "hunter2" not in said
    assert getattr(kernel_state().defaults, "db_url", None) == ""
    loaded_shell.run_cell("%config AgentMagics.db_url = 'postgresql://alice@db/course'")
    assert getattr(kernel_state().defaults, "db_url", None) == "postgresql://alice@db/course"


def test_a_configured_team_store_holds_the_sessions(
    loaded_shell: InteractiveShell, pg_db: PgTestDb, capsys: pytest.CaptureFixture[str]
) -> None:
    """``c.AgentMagics.db_url`` wins over the SQLite file: the cell's session is the login
    role's, in PostgreSQL, and ``%agent status`` names the team store (never a password)."""
    student = pg_db.user("bea")
    loaded_shell.run_cell(f"%config AgentMagics.db_url = '{pg_db.url(student.name)}'")
    assert loaded_shell.run_cell("%%agent --model demo --tools none\nhi\n").error_in_exec is None
    assert "team store" in str(kernel_state().store().db.path)
    rows = pg_db.admin().execute("SELECT user_name, title FROM mibyan.sessions").fetchall()
    assert [owner for owner, _ in rows] == [student.name]
    loaded_shell.run_cell("%agent status")
    out = capsys.readouterr()
    assert "the team store" in out.out
    assert student.password not in out.out + out.err


def test_the_daily_cap_sums_the_login_roles_ledger_on_the_team_store(
    loaded_shell: InteractiveShell,
    pg_db: PgTestDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment claims another user: the cap is still the role's (its spending
    today, its refusal's audit row), since RLS checks the role (docs/architecture.md,
    "Admin policy")."""
    policy = tmp_path / "policy.toml"
    write_policy(policy, "[caps]\ndaily_cost_per_user = 0.5\n")
    monkeypatch.setenv("MIBYAN_POLICY", str(policy))
    monkeypatch.setenv("JUPYTERHUB_USER", "someone-else")
    student = pg_db.user("cal")
    loaded_shell.run_cell(f"%config AgentMagics.db_url = '{pg_db.url(student.name)}'")
    store = kernel_state().store()
    session = store.create("earlier").id
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, input_tokens, output_tokens, cost, created_at)"
            " VALUES (?, 100, 50, ?, ?)",
            (session, 0.6, time.time()),
        )
    result = loaded_shell.run_cell("%%agent --model demo --tools none\nhello\n")
    assert "is used up ($0.60 today)" in str(result.error_in_exec)
    hits = (
        pg_db.admin()
        .execute("SELECT user_name FROM mibyan.audit WHERE kind = 'cap_hit'")
        .fetchall()
    )
    assert hits == [(student.name,)]
    changes = (
        pg_db.admin()
        .execute("SELECT user_name FROM mibyan.audit WHERE kind = 'policy_change'")
        .fetchall()
    )
    assert changes == [(student.name,)]
    # %agent policy: the role's spending today, not the claimed user's
    shown = repr(loaded_shell.run_line_magic("agent", "policy"))
    assert "$0.00 left today" in shown
