"""Plugins in a cell and in ``%agent tools`` (a real InteractiveShell, the loopback fake
model, plugin distributions in a temporary site dir on ``sys.path``): ``--tools
inspect,weather`` offers the plugin's tools after the kernel's and the tool's result
reaches the model's next request; an unknown group's error lists the installed plugins;
``%agent tools`` lists every group, with the plugin's package, tools and approval."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from plugin_support import plugin_site

from mibyan_jupyter.jupyter import plugins
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = plugin_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(where))
    plugins.refresh()
    yield where
    plugins.refresh()
    for module in ("weather_tools", "broken_tools", "loud_tools", "odd_tools"):
        sys.modules.pop(module, None)


def test_a_cell_uses_the_plugin_and_the_result_reaches_the_model(
    site: Path, loaded_shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    fake_provider.push(
        FakeReply(calls=[FakeCall("forecast", {"city": "Paris"})]), FakeReply("Sunny.")
    )
    model = f"fake:m@{fake_provider.base_url}"
    result = loaded_shell.run_cell(f"%%agent --model {model} --tools inspect,weather\nWeather?\n")
    assert result.error_in_exec is None, result.error_in_exec
    first, second = (r.body for r in fake_provider.requests[-2:])
    assert first is not None
    assert second is not None
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["list_variables", "describe_variable", "forecast", "set_alert"]
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results == ["Sunny in Paris, 21 C"]

    bad = loaded_shell.run_cell(f"%%agent --model {model} --tools rainfall\nWeather?\n")
    assert "unknown tool group 'rainfall'" in str(bad.error_in_exec)
    assert "weather" in str(bad.error_in_exec), "the error lists the installed plugins"


def test_percent_agent_tools_lists_every_group(
    site: Path, loaded_shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    table = loaded_shell.run_line_magic("agent", "tools")
    rows = {row[0]: tuple(row) for row in table.rows}
    assert list(rows)[:8] == [
        "inspect", "python", "files", "shell", "memory", "notebook", "clarify", "delegate"
    ]  # fmt: skip
    assert rows["python"][2:5] == ("yes", "run_python", "asks: run_python")
    assert rows["shell"][2] == ""
    weather = rows["weather"]
    assert weather[1:] == (
        "plugin weather-tools",
        "",
        "forecast, set_alert",
        "asks: set_alert; runs freely: forecast",
        "Weather forecasts and alerts",
    )
    assert rows["broken"][5] == "failed to load (see the note)"
    assert "No module named" in table.note
    capsys.readouterr()
    plugins.refresh()
    again = loaded_shell.run_line_magic("agent", "tools --refresh")
    assert "weather" in {row[0] for row in again.rows}
    assert "No module named" in capsys.readouterr().err, "read again: said again"


def test_percent_agent_tools_lists_configured_mcp_servers_without_starting_them(
    loaded_shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "conf"
    (config / "mibyan").mkdir(parents=True)
    servers = {
        "echo": {"command": "never-started-echo", "args": ["--x"]},
        "web": {"url": "http://127.0.0.1:9/mcp", "disabled": True},
    }
    (config / "mibyan" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    table = loaded_shell.run_line_magic("agent", "tools")
    rows = {row[0]: tuple(row) for row in table.rows}
    assert rows["mcp:echo"][1:] == (
        "MCP",
        "",
        "%agent mcp tools echo",
        "asks (default policy)",
        "never-started-echo --x",
    )
    assert rows["mcp:web"][5] == "http://127.0.0.1:9/mcp (disabled)"
