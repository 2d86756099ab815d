"""The live view's header follows the session: after a failover it says which model
answered ("answered by"), and when the primary answers again it no longer does; after a
compaction it names the child session (the cell's run hooks the view to the writer, as the
kernel state is), in a real shell over loopback HTTP and a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from view_support import HEADER, Recorder, record_comms, reply_events

from mibyan_jupyter.core.events import MessageEnd
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.notices import FallbackNotice
from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, Fault

FALLBACK = FallbackNotice(from_model="primary-model", to_model="backup-model", reason="404")


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def test_the_header_says_which_model_answered_last(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(FALLBACK)
    for event in reply_events(["from the ", "backup "]):
        view(event)
    assert recorder.ops("header")[-1]["answered"] == "backup-model"
    for event in reply_events(["the backup ", "again "]):  # no failover: the primary
        view(event)
    assert "answered" not in recorder.ops("header")[-1]
    assert len(recorder.ops("header")) == 3  # the first, "answered by", and back


def test_a_failed_reply_says_nothing_about_who_answers(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(FALLBACK)
    view(MessageEnd(message=AssistantMessage(stop_reason="error", error_message="down")))
    assert len(recorder.ops("header")) == 1


def test_set_session_renames_the_header_once(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view.set_session("child-5678")
    view.set_session("child-5678")
    assert [op["session"] for op in recorder.ops("header")] == ["s-1234", "child-5678"]


# -- in a cell -------------------------------------------------------------------------------


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "memory"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "JPY_SESSION_NAME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    reset_kernel_state()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mibyan_jupyter")
    yield ip
    ip.run_line_magic("unload_ext", "mibyan_jupyter")
    reset_kernel_state()
    InteractiveShell.clear_instance()


def cell(shell: InteractiveShell, line: str, prompt: str) -> None:
    result = shell.run_cell(f"%%agent {line}\n{prompt}\n")
    assert result.error_in_exec is None, result.error_in_exec


def headers_of_last_view(recorder: Recorder) -> list[dict[str, Any]]:
    """The header ops of the last widget (each widget's batches count from seq 0)."""
    opened = [i for i, s in enumerate(recorder.sent) if s.msg_type == "comm_open"]
    last = Recorder(sent=recorder.sent[opened[-1] :])
    return last.ops("header")


def test_a_cell_after_a_failover_says_answered_by(
    shell: InteractiveShell, fake_provider: FakeProviderServer, recorder: Recorder
) -> None:
    url = fake_provider.base_url
    fake_provider.push(Fault("status", status=404), FakeReply("from the fallback"))
    cell(shell, f"--model fake:primary-model@{url} --fallback fake:backup-model@{url}", "hi")
    headers = headers_of_last_view(recorder)
    assert headers[0]["model"] == "fake:primary-model"
    assert "answered" not in headers[0]
    assert headers[-1]["answered"] == "backup-model"


def test_a_cell_that_compacts_names_the_child_session(
    shell: InteractiveShell, fake_provider: FakeProviderServer, recorder: Recorder
) -> None:
    model = f"fake:m@{fake_provider.base_url}"
    fake_provider.push(*(FakeReply(f"answer {n} " + "words " * 40) for n in range(12)))
    cell(shell, f"--model {model} --tools none --compact off", "first question")
    for n in range(11):
        cell(shell, "--compact off", f"question {n} " + "more " * 40)
    (parent,) = kernel_state().store().list()
    fake_provider.push(FakeReply("The user asked twelve questions."), FakeReply("after"))
    cell(shell, "--compact auto --context-window 1500", "next")
    child = kernel_state().current_session(None)
    assert child is not None
    assert child != parent.id
    assert kernel_state().store().get(child).parent_id == parent.id
    headers = headers_of_last_view(recorder)
    assert headers[0]["session"] == parent.id
    assert headers[-1]["session"] == child
