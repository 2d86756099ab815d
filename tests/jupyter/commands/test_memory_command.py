"""``%agent memory`` through a real InteractiveShell: the user sees and edits the same files
the agent's memory tools write, with one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.state import reset_kernel_state


@pytest.fixture
def ip(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "memory"))
    monkeypatch.chdir(tmp_path)
    reset_kernel_state()
    shell.run_line_magic("load_ext", "mibyan_jupyter")
    yield shell
    shell.run_line_magic("unload_ext", "mibyan_jupyter")


def plain(result: object) -> str:
    return result._repr_mimebundle_()["text/plain"]  # type: ignore[attr-defined]


def test_add_show_replace_remove(ip: InteractiveShell, tmp_path: Path) -> None:
    assert "(empty)" in plain(ip.run_line_magic("agent", "memory"))
    ip.run_line_magic("agent", "memory add revenue is in EUR")
    ip.run_line_magic("agent", "memory add --user prefers short answers")
    shown = plain(ip.run_line_magic("agent", "memory show"))
    assert "revenue is in EUR" in shown
    assert "prefers short answers" in shown
    ip.run_line_magic("agent", 'memory replace 1 "revenue is in USD"')
    assert (tmp_path / "memory" / "MEMORY.md").read_text().endswith("- revenue is in USD\n")
    ip.run_line_magic("agent", "memory remove --user short")
    assert "(empty)" in plain(ip.run_line_magic("agent", "memory show --user"))
    assert "MEMORY.md (exists)" in plain(ip.run_line_magic("agent", "memory path"))


def test_bad_edits_are_one_line_usage_errors(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="no entry contains 'nothing'"):
        ip.run_line_magic("agent", "memory remove nothing")
    with pytest.raises(UsageError, match="replace takes OLD and NEW"):
        ip.run_line_magic("agent", "memory replace only-one")
    with pytest.raises(UsageError, match="invalid choice"):
        ip.run_line_magic("agent", "memory forget x")
