"""A resumed session continues as it was, in a real InteractiveShell over real loopback
HTTP: the request's ``model`` is the session's model (not the configured default), the
view's header and ``%agent status`` name the same model, recorded settings come back, an
explicit option wins for its cell, a missing key says what to set, a failover leaves the
primary in place, and a damaged transcript is repaired with the user told so."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, Fault


@pytest.fixture
def shell(loaded_shell: InteractiveShell) -> InteractiveShell:
    return loaded_shell


@pytest.fixture
def headers(monkeypatch: pytest.MonkeyPatch) -> list[ViewHeader]:
    from mibyan_jupyter.jupyter.cell import run

    seen: list[ViewHeader] = []
    real_view = run.AgentView

    def recording_view(header: ViewHeader, **kwargs: Any) -> AgentView:
        seen.append(header)
        return real_view(header, **kwargs)

    monkeypatch.setattr(run, "AgentView", recording_view)
    return seen


def cell(shell: InteractiveShell, line: str, prompt: str) -> None:
    result = shell.run_cell(f"%%agent {line}\n{prompt}\n")
    assert result.error_in_exec is None, result.error_in_exec


def restart(shell: InteractiveShell, default_model: str = "demo") -> None:
    """As after a kernel restart, with another configured default model."""
    shell.run_line_magic("unload_ext", "mibyan_jupyter")
    reset_kernel_state()
    shell.run_line_magic("load_ext", "mibyan_jupyter")
    shell.run_line_magic("config", f"AgentMagics.model = {default_model!r}")


def status_rows(shell: InteractiveShell) -> dict[str, str]:
    table = shell.run_line_magic("agent", "status")
    return {str(row[0]): str(row[1]) for row in table.rows}


def only_session() -> str:
    (info,) = kernel_state().store().list()
    return info.id


@pytest.mark.parametrize("how", ["resume", "session option"])
def test_a_resumed_session_continues_with_its_model_and_settings(
    shell: InteractiveShell,
    fake_provider: FakeProviderServer,
    headers: list[ViewHeader],
    how: str,
) -> None:
    primary = f"fake:primary-model@{fake_provider.base_url}"
    fake_provider.push(FakeReply("one"), FakeReply("two"), FakeReply("three"), FakeReply("four"))
    cell(
        shell,
        f"--model {primary} --tools none --thinking high --tool-mode sequential --max-turns 5",
        "first",
    )
    session = only_session()
    restart(shell)  # the configured default is now the demo model
    if how == "resume":
        shell.run_line_magic("agent", f"resume {session}")
        cell(shell, "", "second")
    else:  # a new notebook naming the session
        cell(shell, f"--session {session}", "second")
    body = fake_provider.requests[-1].body
    assert body is not None
    assert body["model"] == "primary-model"  # the session's model answered, not the demo
    users = [m["content"].strip() for m in body["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]
    assert headers[-1].model == "fake:primary-model"
    assert not headers[-1].demo
    assert status_rows(shell)["model"] == headers[-1].model  # header, status, request agree
    handle = kernel_state().session(session)
    assert handle is not None
    assert handle.agent.state.thinking_level == "high"
    assert handle.agent.tool_execution == "sequential"
    assert handle.agent.budget.max_turns == 5

    cell(shell, f"--model fake:other-model@{fake_provider.base_url}", "third")
    assert fake_provider.requests[-1].body["model"] == "other-model"  # type: ignore[index]
    assert headers[-1].model.startswith("fake:other-model")
    cell(shell, "", "fourth")  # the override was the cell's: the session keeps its model
    assert fake_provider.requests[-1].body["model"] == "primary-model"  # type: ignore[index]
    assert len(kernel_state().store().list()) == 1


def test_a_hosted_session_model_without_its_key_says_what_to_set(
    shell: InteractiveShell, fake_provider: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-resume-key")
    fake_provider.push(FakeReply("hello"))
    cell(shell, f"--model openai:gpt-4.1-mini@{fake_provider.base_url} --tools none", "hi")
    session = only_session()
    restart(shell)
    monkeypatch.delenv("OPENAI_API_KEY")
    result = shell.run_cell(f"%%agent --session {session}\nagain\n")
    assert isinstance(result.error_in_exec, UsageError)
    message = str(result.error_in_exec)
    assert "this session's model" in message
    assert "OPENAI_API_KEY" in message
    assert len(fake_provider.requests) == 1  # failed before anything was sent
    cell(shell, f"--session {session} --model demo", "again, with the demo")  # a way out


def test_after_a_failover_the_session_keeps_its_primary_model(
    shell: InteractiveShell, fake_provider: FakeProviderServer, headers: list[ViewHeader]
) -> None:
    url = fake_provider.base_url
    fake_provider.push(Fault("status", status=404), FakeReply("from the fallback"))
    cell(shell, f"--model fake:primary-model@{url} --fallback fake:backup-model@{url}", "hi")
    models = [r.body["model"] for r in fake_provider.requests if r.body]
    assert models == ["primary-model", "backup-model"]
    session = only_session()
    assert kernel_state().store().get(session).model == f"fake:primary-model@{url}"
    rows = status_rows(shell)
    assert rows["model"] == "fake:primary-model"
    assert rows["last answer by"] == "backup-model"
    fake_provider.push(FakeReply("primary again"))
    cell(shell, "", "next")
    assert fake_provider.requests[-1].body["model"] == "primary-model"  # type: ignore[index]
    assert headers[-1].model == "fake:primary-model"
    assert "last answer by" not in status_rows(shell)


def test_a_damaged_session_is_repaired_and_the_first_cell_says_so(
    shell: InteractiveShell,
    fake_provider: FakeProviderServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = fake_provider.base_url
    fake_provider.push(FakeReply("one"), FakeReply("two"), FakeReply("three"))
    cell(shell, f"--model fake:primary-model@{url} --tools none", "first")
    session = only_session()
    restart(shell)
    with kernel_state().store().db.transaction() as conn:  # damage it with raw SQL
        conn.execute("UPDATE messages SET data = 'not json' WHERE seq = 0")
        conn.execute(
            "UPDATE messages SET data = CAST(? AS TEXT) WHERE seq = 1",
            (b'{"role":"assistant","content":"caf\xff"}',),
        )
    capsys.readouterr()
    cell(shell, f"--session {session}", "second")
    out = capsys.readouterr().out
    assert "mibyan: repaired on load: 1 stored message(s) could not be read" in out
    assert "mibyan: repaired on load: 1 stored message(s) held text that is not valid" in out
    body = fake_provider.requests[-1].body
    assert body is not None
    sent = [m["content"].strip() for m in body["messages"][1:]]
    assert sent == ["first", "caf\ufffd", "second"]
    cell(shell, "", "third")  # told once
    assert "repaired on load" not in capsys.readouterr().out
