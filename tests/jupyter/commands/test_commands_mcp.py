"""``%agent mcp`` through a real InteractiveShell with the extension loaded: servers added,
listed, disabled, enabled and removed in the user's file (a temporary Jupyter config dir),
a folder's file trusted and untrusted, tools listed from a real stdio server, secrets never
shown, and every change refused to code an agent ran."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.kernel_tools.execute import run_code
from mibyan_jupyter.mcp.config import user_config_path

SERVER = Path(__file__).parents[2] / "mcp" / "servers" / "secret_echo.py"


@pytest.fixture
def ip(
    loaded_shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    yield loaded_shell
    from mibyan_jupyter.mcp.hub import kernel_hub

    kernel_hub().stop_all()


def plain(result: object) -> str:
    return result._repr_mimebundle_()["text/plain"]  # type: ignore[attr-defined]


def agent(ip: InteractiveShell, line: str) -> str:
    return plain(ip.run_line_magic("agent", f"mcp {line}"))


def servers() -> dict[str, dict[str, object]]:
    loaded: dict[str, dict[str, object]] = json.loads(user_config_path().read_text())["mcpServers"]
    return loaded


def folder_file(tmp_path: Path, entries: dict[str, object]) -> Path:
    path = tmp_path / ".jupyter" / "mcp.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


def test_add_list_disable_enable_remove_edit_the_users_file(ip: InteractiveShell) -> None:
    text = agent(ip, f"add echo --command {sys.executable} --arg {SERVER} --arg=--flag")
    assert "Added MCP server 'echo'" in text
    assert "--tools mcp:echo" in text
    assert servers() == {"echo": {"command": sys.executable, "args": [str(SERVER), "--flag"]}}
    assert stat.S_IMODE(user_config_path().stat().st_mode) == 0o600
    listed = agent(ip, "list")
    assert "MCP servers" in listed
    assert "echo" in listed
    assert "stdio" in listed
    assert "not started" in listed
    assert "yes (your file)" in listed
    agent(ip, "disable echo")
    assert servers()["echo"]["disabled"] is True
    assert " off " in agent(ip, "")  # list is the default action
    agent(ip, "enable echo")
    assert "disabled" not in servers()["echo"]
    agent(ip, "remove echo")
    assert servers() == {}


def test_every_flag_of_add_is_written(ip: InteractiveShell) -> None:
    agent(ip, "add t --command c --arg a --cwd sub --timeout 5 --env A=${B}")
    assert servers()["t"] == {
        "command": "c",
        "args": ["a"],
        "env": {"A": "${B}"},
        "cwd": "sub",
        "timeout": 5.0,
    }
    agent(ip, "add h --url https://h/mcp --header A=${B} --timeout 2")
    assert servers()["h"] == {"url": "https://h/mcp", "headers": {"A": "${B}"}, "timeout": 2.0}


def test_a_reference_stays_a_reference_and_a_literal_is_never_shown(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.user_ns["TOKEN"] = "python-variable-value"  # IPython would fill {TOKEN} from it
    ip.run_cell("%agent mcp add web --url http://127.0.0.1:9/mcp --header Authorization=${{TOKEN}}")
    assert servers()["web"] == {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "${TOKEN}"},
    }
    text = agent(ip, "add lit --url http://127.0.0.1:9/mcp --header X-Key=literal-value-1234")
    assert "X-Key written as a literal value" in text
    listed = agent(ip, "list")
    assert "Authorization=${TOKEN}" in listed
    assert "X-Key=(hidden)" in listed
    assert "literal-value-1234" not in listed
    monkeypatch.setenv("SHOWN_API_KEY", "sk-in-the-args-0001")
    agent(ip, f"add arg --command {sys.executable} --arg=--key --arg=sk-in-the-args-0001")
    assert "sk-in-the-args-0001" not in agent(ip, "list")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("add", "needs a server's NAME"),
        ("add x", "needs command (a stdio server) or url"),
        ("add x --url ftp://h", "url must start with http://"),
        ("add 'a b' --command c", "1-40 letters"),
        ("add x --command c --env NOEQUALS", "--env takes KEY=VALUE"),
        ("remove nope", "no server 'nope'"),
        ("frobnicate", "invalid choice"),
        ("add x --command c --bogus 1", "unrecognized arguments"),
    ],
)
def test_mistakes_are_one_usage_line(ip: InteractiveShell, line: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        agent(ip, line)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not user_config_path().exists() or servers() == {}


def test_a_folders_file_is_listed_untrusted_then_trusted_until_it_changes(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    path = folder_file(tmp_path, {"here": {"command": "srv", "args": ["--go"]}})
    listed = agent(ip, "list")
    assert "untrusted" in listed
    assert str(path) in listed
    text = agent(ip, "trust")
    assert f"Trusted {path}" in text
    assert "here (srv --go)" in text
    assert "trusted" in agent(ip, "list").split("srv --go")[1]
    path.write_text(path.read_text().replace("--go", "--gone"))
    assert "changed" in agent(ip, "list")
    agent(ip, "trust")
    assert "no longer trusted" in agent(ip, "untrust")
    with pytest.raises(UsageError, match=r"is configured in .*the folder.s file"):
        agent(ip, "disable here")


@pytest.mark.slow  # a real server process starts (~1-7 s on a loaded machine)
def test_tools_starts_the_server_and_lists_its_tools(ip: InteractiveShell) -> None:
    agent(ip, f"add sec --command {sys.executable} --arg {SERVER}")
    shown = agent(ip, "tools sec")
    assert "sec__echo" in shown
    assert "sec__secret_seen" in shown
    assert "[MCP server sec]" in shown
    assert "running, 3 tools" in agent(ip, "list")
    agent(ip, "disable sec")  # disabling stops it
    assert "running" not in agent(ip, "list")


def test_an_untrusted_folder_server_is_not_started_by_tools(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    folder_file(tmp_path, {"here": {"command": sys.executable, "args": [str(SERVER)]}})
    shown = agent(ip, "tools here")
    assert "here: not started" in shown
    assert "is not trusted" in shown
    assert "here__echo" not in shown


def test_code_an_agent_ran_cannot_add_or_trust_a_server(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    path = folder_file(tmp_path, {"here": {"command": "srv"}})
    for line in ("add x --command srv", "trust", "untrust", "remove x"):
        execution = run_code(f"%agent mcp {line}", ip.user_ns, shell=ip)
        assert execution.error is not None
        assert execution.error["ename"] == "RefusedInsideRun", execution.error
    code = (
        "from mibyan_jupyter.jupyter.cell.mcp_tools import kernel_trust\n"
        f"kernel_trust().trust(__import__('pathlib').Path({str(path)!r}))"
    )
    execution = run_code(code, ip.user_ns, shell=ip)
    assert execution.error is not None
    assert execution.error["ename"] == "TrustRefused"
    execution = run_code(
        f"get_ipython().run_line_magic('config', 'AgentMagics.mcp_trust_folders = [{str(tmp_path)!r}]')",
        ip.user_ns,
        shell=ip,
    )
    assert not user_config_path().exists()
    assert "untrusted" in agent(ip, "list")  # neither the file nor the setting trusts it


def test_a_configured_folder_is_trusted(ip: InteractiveShell, tmp_path: Path) -> None:
    folder_file(tmp_path, {"here": {"command": "srv"}})
    ip.run_line_magic("config", f"AgentMagics.mcp_trust_folders = [{str(tmp_path)!r}]")
    assert "configured" in agent(ip, "list")
    assert "mcp_trust_folders" in plain(ip.run_line_magic("agent", "config"))


def cell_error(ip: InteractiveShell, line: str) -> str:
    result = ip.run_cell(f"%%agent --model demo {line}\nhi")
    assert result.error_in_exec is not None
    return str(result.error_in_exec)


def test_a_cell_names_unknown_or_disabled_servers_in_one_line(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "no MCP server is configured" in cell_error(ip, "--tools mcp")
    agent(ip, "add off --command srv")
    agent(ip, "disable off")
    assert "configured: off (%agent mcp list)" in cell_error(ip, "--tools mcp:nope")
    capsys.readouterr()
    ran = ip.run_cell("%%agent --model demo --tools mcp:off\nhi")
    assert ran.error_in_exec is None
    err = capsys.readouterr().err
    assert "MCP server 'off' is disabled in " in err
    assert "%agent mcp enable off turns it on" in err
    ran = ip.run_cell("%%agent --model demo --tools mcp\nhi")  # every enabled one: none
    assert ran.error_in_exec is None
    assert "disabled" not in capsys.readouterr().err  # `mcp` alone skips them quietly
