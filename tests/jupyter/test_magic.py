"""The magics through a real IPython InteractiveShell: loading, the input transformer,
options and their errors, help, configuration traitlets, and the %agent commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from mibyan_jupyter.jupyter.cell.options import AgentUsageError, parse_cell_line
from mibyan_jupyter.jupyter.defaults import Defaults
from mibyan_jupyter.jupyter.entry.transform import agent_cell_transformer
from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state


def configured() -> Defaults:
    """The defaults a cell starts from: the loaded magic's settings, held by the kernel state."""
    return kernel_state().defaults


@pytest.fixture
def shell(loaded_shell: InteractiveShell) -> InteractiveShell:
    return loaded_shell


def test_load_ext_registers_both_magics_and_the_transformer(shell: InteractiveShell) -> None:
    magics = shell.magics_manager.magics
    assert "agent" in magics["cell"]
    assert "agent" in magics["line"]
    assert agent_cell_transformer in shell.input_transformers_cleanup
    shell.run_line_magic("load_ext", "mibyan_jupyter")  # twice: no second transformer
    assert shell.input_transformers_cleanup.count(agent_cell_transformer) == 1


def test_load_ext_stays_light() -> None:
    """``%load_ext`` imports only IPython's magic machinery and traitlets: the core,
    pydantic, httpx, the store, the providers and the view load on the first cell."""
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "from traitlets.config import Config\n"
        "config = Config()\n"
        "config.HistoryManager.hist_file = ':memory:'\n"
        "shell = InteractiveShell.instance(config=config)\n"
        "shell.run_line_magic('load_ext', 'mibyan_jupyter')\n"
        "heavy = ('pydantic', 'httpx', 'anywidget', 'mibyan_jupyter.core', 'mibyan_jupyter.store',"
        " 'mibyan_jupyter.providers', 'mibyan_jupyter.jupyter.view')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_transformer_rewrites_an_agent_cell_into_an_await() -> None:
    lines = ["%%agent --model demo\n", "What is 'x'?\n", "Second line\n"]
    (code,) = agent_cell_transformer(lines)
    assert code.startswith("await __import__('mibyan_jupyter.jupyter.cell.run'")
    assert "\"What is 'x'?\\nSecond line\\n\", '--model demo')" in code
    compile(code, "<cell>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT


@pytest.mark.parametrize("first", ["%%agent?\n", "%%agents\n", "print(1)\n"])
def test_transformer_leaves_help_and_other_cells_alone(first: str) -> None:
    lines = [first, "body\n"]
    assert agent_cell_transformer(lines) == lines


@pytest.mark.parametrize("lines", [["%%agent --help"], ["%%agent -h\n", "body\n"]])
def test_transformer_turns_help_into_printing_the_options(lines: list[str]) -> None:
    (code,) = agent_cell_transformer(lines)
    assert code.startswith("print(")
    assert "USAGE" in code


def test_help_lists_every_option(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell("%%agent --help\nanything\n")
    out = capsys.readouterr().out
    for option in (
        "--model", "--session", "--system", "--tools", "--approve", "--max-turns",
        "--max-tokens", "--max-cost", "--thinking", "--tool-mode", "--fallback", "--after",
    ):  # fmt: skip
        assert option in out, option
    doc = shell.magics_manager.magics["cell"]["agent"].__doc__
    assert doc is not None
    assert "--tool-mode" in doc


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--max-turns zero", "--max-turns must be a positive integer"),
        ("--max-turns 0", "--max-turns must be a positive integer"),
        ("--max-cost -2", "--max-cost must be a positive number"),
        ("--approve maybe", "--approve must be one of ask, auto, deny"),
        ("--thinking huge", "--thinking must be one of off, minimal"),
        ("--tool-mode random", "--tool-mode must be one of parallel, sequential"),
        ("--colour red", "unrecognized arguments: --colour"),
        ("--session 'two words'", "--session must be new, last or a session id"),
        ("--system 'unclosed", "cannot read the options"),
    ],
)
def test_bad_options_say_what_is_allowed(shell: InteractiveShell, line: str, message: str) -> None:
    with pytest.raises(AgentUsageError, match=message):
        parse_cell_line(line, configured())
    result = shell.run_cell(f"%%agent {line}\nhello\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert message in str(result.error_in_exec)


def test_bad_model_and_missing_key_fail_before_any_run(shell: InteractiveShell) -> None:
    result = shell.run_cell("%%agent --model nosuchprovider:x\nhello\n")
    assert isinstance(result.error_in_exec, UsageError)
    result = shell.run_cell("%%agent --model openai:gpt-4.1-mini\nhello\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "OPENAI_API_KEY" in str(result.error_in_exec)
    result = shell.run_cell("%%agent --tools python,magic\nhello\n")
    assert "magic" in str(result.error_in_exec)


def test_usage_errors_render_as_one_line(shell: InteractiveShell) -> None:
    error = AgentUsageError("--max-turns must be positive")
    assert error._render_traceback_() == ["UsageError: --max-turns must be positive"]


def test_traitlets_are_the_defaults_and_can_be_configured(shell: InteractiveShell) -> None:
    shell.run_line_magic("config", "AgentMagics.max_turns = 7")
    shell.run_line_magic("config", "AgentMagics.tools = 'inspect'")
    options = parse_cell_line("", configured())
    assert options.max_turns == 7
    assert options.tools == "inspect"
    assert parse_cell_line("--max-turns 3", configured()).max_turns == 3


def test_mibyan_approve_overrides_the_default_but_not_the_cell(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read as the extension loaded (jupyter/guard.py): set it, then load again.
    monkeypatch.setenv("MIBYAN_APPROVE", "auto")
    shell.run_line_magic("reload_ext", "mibyan_jupyter")
    assert parse_cell_line("", configured()).approve == "auto"
    assert parse_cell_line("--approve deny", configured()).approve == "deny"
    monkeypatch.setenv("MIBYAN_APPROVE", "sometimes")
    shell.run_line_magic("reload_ext", "mibyan_jupyter")
    with pytest.raises(AgentUsageError, match="sometimes"):
        parse_cell_line("", configured())


def test_profile_config_reaches_the_magics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "s.sqlite3"))
    config = Config()
    config.AgentMagics.model = "demo-slow"
    config.AgentMagics.approve = "deny"
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_line_magic("load_ext", "mibyan_jupyter")
        options = parse_cell_line("", configured())
        assert options.model == "demo-slow"
        assert options.approve == "deny"
    finally:
        ip.run_line_magic("unload_ext", "mibyan_jupyter")
        reset_kernel_state()
        InteractiveShell.clear_instance()


def test_line_magic_help_and_unknown_command(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_line_magic("agent", "--help")
    assert "%agent sessions" in capsys.readouterr().out
    with pytest.raises(UsageError, match="unknown command 'frobnicate'"):
        shell.run_line_magic("agent", "frobnicate")
    with pytest.raises(UsageError, match="export"):
        shell.run_line_magic("agent", "export")  # missing the session


def test_models_and_config_are_tables(shell: InteractiveShell) -> None:
    models = shell.run_line_magic("agent", "models")
    assert "demo" in repr(models)
    assert "OPENAI_API_KEY" in repr(models)
    config = shell.run_line_magic("agent", "config")
    bundle = config._repr_mimebundle_()
    assert "c.AgentMagics.max_turns" in bundle["text/html"]
    assert "<table>" in bundle["text/html"]


def test_policy_set_persists_as_always_and_reset_forgets(shell: InteractiveShell) -> None:
    table = shell.run_line_magic("agent", "policy set run_python allow")
    assert "run_python" in repr(table)
    assert "always" in repr(table)
    assert kernel_state().store().always_rules() == {"run_python": True}
    shell.run_line_magic("agent", "policy reset")
    assert kernel_state().store().always_rules() == {}
    with pytest.raises(UsageError):
        shell.run_line_magic("agent", "policy set run_python sometimes")


def test_unknown_session_is_a_usage_error(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="%agent sessions"):
        shell.run_line_magic("agent", "resume nosuchsession")
    with pytest.raises(UsageError, match="no session yet"):
        shell.run_line_magic("agent", "resume last")


def _one_session() -> str:
    (info,) = kernel_state().store().list()
    return info.id


def test_a_cell_runs_through_the_transformer_and_successive_cells_are_one_session(
    shell: InteractiveShell,
) -> None:
    result = shell.run_cell("%%agent --model demo --tools none\nHello there\n")
    assert result.error_in_exec is None, result.error_in_exec
    result = shell.run_cell("%%agent --tools none\nAnd again\n")
    assert result.error_in_exec is None, result.error_in_exec
    session = _one_session()
    from mibyan_jupyter.store.records import load_messages

    messages = load_messages(kernel_state().store().db, session)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert "And again" in str(messages[2].content)


def test_the_real_cell_magic_runs_headless_and_the_policy_decides(
    shell: InteractiveShell,
) -> None:
    shell.run_cell_magic(
        "agent", "--model demo --tools python", "Use run_python:\n```python\nprint(1)\n```"
    )
    rows = (
        kernel_state()
        .store()
        .db.conn.execute("SELECT name, decision, decided_by FROM tool_calls")
        .fetchall()
    )
    assert rows == [("run_python", "denied", "policy")]


def test_session_commands_after_a_run(shell: InteractiveShell, tmp_path: Path) -> None:
    shell.run_cell("%%agent --model demo --tools none\nabout pineapples\n")
    session = _one_session()
    listing = repr(shell.run_line_magic("agent", "sessions"))
    assert session[:8] in listing
    assert "about pineapples" in listing
    hits = shell.run_line_magic("agent", "sessions --search pineapples")
    assert "<mark>" in hits._repr_html_()
    assert session[:8] in repr(shell.run_line_magic("agent", "status"))
    shell.run_line_magic("agent", f"export {session[:8]} out.ipynb")
    shell.run_line_magic("agent", "export current out.md")
    assert "pineapples" in (tmp_path / "out.md").read_text()
    import nbformat

    nbformat.validate(nbformat.read(tmp_path / "out.ipynb", as_version=4))
    shell.run_line_magic("agent", "fork current --at 1")
    assert len(kernel_state().store().list()) == 2
    shell.run_line_magic("agent", f"delete {session}")
    assert session not in [i.id for i in kernel_state().store().list()]


def test_an_api_key_never_reaches_outputs_or_the_store(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A model that echoes the key (prompt injection, a leaky proxy) over real HTTP."""
    from mibyan_jupyter.testing import FakeProviderServer, FakeReply

    secret = "sk-test-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    published: list[str] = []
    original = shell.display_pub.publish

    def record(data: dict[str, object], *args: object, **kwargs: object) -> None:
        published.append(repr(data))
        original(data, *args, **kwargs)

    monkeypatch.setattr(shell.display_pub, "publish", record)
    with FakeProviderServer() as server:
        server.push(FakeReply(f"Sure, your key is {secret} and again {secret}."))
        result = shell.run_cell(
            f"%%agent --model openai:gpt-4.1-mini@{server.base_url} --tools none\n"
            f"What is my key? It is {secret}\n"
        )
        assert result.error_in_exec is None, result.error_in_exec
        assert server.requests[0].headers.get("authorization") == f"Bearer {secret}"
    assert published, "the cell displayed nothing"
    assert "[redacted]" in "".join(published)
    assert secret not in "".join(published)
    database = (tmp_path / "sessions.sqlite3").read_bytes()
    for path in tmp_path.glob("sessions.sqlite3*"):
        assert secret.encode() not in path.read_bytes(), path
    assert database


def test_a_resumed_session_is_answered_by_the_model_its_header_names(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header and the agent take the model from the cell's one plan, also when the
    session was created with another model and resumed in a fresh kernel state: the
    session's own model (issue 10, item 10: it wins over the configured default), and the
    cell's explicit --model over both."""
    from mibyan_jupyter.jupyter.cell import run
    from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

    headers: list[ViewHeader] = []
    real_view = run.AgentView

    def recording_view(header: ViewHeader, **kwargs: Any) -> AgentView:
        headers.append(header)
        return real_view(header, **kwargs)

    monkeypatch.setattr(run, "AgentView", recording_view)
    assert shell.run_cell("%%agent --model demo --tools none\nfirst\n").error_in_exec is None
    session = _one_session()
    shell.run_line_magic("unload_ext", "mibyan_jupyter")  # as after a kernel restart
    shell.run_line_magic("load_ext", "mibyan_jupyter")
    shell.run_line_magic("config", "AgentMagics.model = 'demo-slow'")
    shell.run_line_magic("agent", f"resume {session}")
    result = shell.run_cell("%%agent --tools none\nsecond\n")
    assert result.error_in_exec is None, result.error_in_exec
    handle = kernel_state().session(session)
    assert handle is not None
    assert [h.model for h in headers] == ["demo", "demo"]
    assert handle.agent.state.model == "demo"
    assert headers[-1].session_id == session
    result = shell.run_cell("%%agent --tools none --model demo-slow\nthird\n")
    assert result.error_in_exec is None, result.error_in_exec
    assert [h.model for h in headers] == ["demo", "demo", "demo-slow"]
    assert handle.agent.state.model == "demo-slow"


def test_the_options_a_line_gives_are_told_apart_from_the_defaults(
    shell: InteractiveShell,
) -> None:
    """What the line set overrides a resumed session's recorded settings; what the
    defaults filled in does not (issue 10, item 10)."""
    shell.run_line_magic("config", "AgentMagics.max_turns = 7")
    options = parse_cell_line("", configured())
    assert options.max_turns == 7
    assert options.explicit == frozenset()
    given = parse_cell_line("--model demo --max-turns 3 --thinking high --system hi", configured())
    assert given.explicit == {"model", "max_turns", "thinking", "system_prompt"}
