"""``c.AgentMagics.db_url`` / ``MIBYAN_DB_URL`` in this version: a URL holding a password is
refused when it is set (it would be kept in the user's config), and a configured team store
is said, once, not to hold the sessions yet, naming the SQLite file that does."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

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


def test_a_configured_team_store_is_said_not_to_hold_sessions_yet(
    loaded_shell: InteractiveShell,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MIBYAN_DB_URL", "postgresql://alice@db/course")
    assert loaded_shell.run_cell("%%agent --model demo --tools none\nhi\n").error_in_exec is None
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "team store" in line]
    assert len(lines) == 1
    assert str(kernel_state().store().db.path) in lines[0]
    loaded_shell.run_cell("%%agent --model demo --tools none\nagain\n")
    assert "team store" not in capsys.readouterr().err  # said once
