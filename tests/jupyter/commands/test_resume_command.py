"""``%agent resume`` on a damaged session: the history is shown and the user is told, in one
line, what had to be repaired to load it (never refused for good)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.core import AssistantMessage, UserMessage
from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state
from mibyan_jupyter.store.records import append_message


@pytest.fixture
def ip(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-by-resume-0000")
    monkeypatch.chdir(tmp_path)
    reset_kernel_state()
    shell.run_line_magic("load_ext", "mibyan_jupyter")
    yield shell
    shell.run_line_magic("unload_ext", "mibyan_jupyter")


def texts(shown: object) -> str:
    items = shown if isinstance(shown, list) else [shown]
    return "\n".join(item._repr_mimebundle_()["text/plain"] for item in items)


def test_resume_shows_what_was_repaired(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    store = kernel_state().store()
    info = store.create(model="openai:gpt-4.1-mini", config={"system_prompt": "be brief"})
    for message in (
        UserMessage(content="first question"),
        AssistantMessage(content="first answer"),
        UserMessage(content="second question"),
        AssistantMessage(content="second answer"),
    ):
        append_message(store.db, info.id, message)
    with store.db.transaction() as conn:  # a row an older version wrote badly
        conn.execute(
            "UPDATE messages SET data = '{not json' WHERE session_id = ? AND seq = 2",
            (info.id,),
        )
    ip.run_line_magic("agent", f"resume {info.id}")
    shown = capsys.readouterr().out
    assert "first question" in shown
    assert "Repaired on load:" in shown
