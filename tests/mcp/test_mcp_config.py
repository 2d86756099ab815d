"""The MCP configuration files (mibyan_jupyter/mcp/config.py): the shape, one line per
problem naming the file and the key, the merge rule, and editing the user's file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mibyan_jupyter.mcp.config import (
    edit_user_file,
    folder_config_path,
    load_config,
    parse_entry,
    read_file,
    starts,
    user_config_path,
)
from mibyan_jupyter.mcp.spec import McpConfigError


def write(path: Path, servers: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_the_claude_desktop_shape_gives_stdio_and_http_specs(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        {
            "files": {"command": "npx", "args": ["-y", "srv"], "env": {"T": "${TOKEN}"}},
            "web": {"url": "https://example.invalid/mcp", "headers": {"A": "Bearer ${K}"}},
            "typed": {"type": "http", "url": "http://127.0.0.1:9/mcp", "timeout": 5},
            "off": {"command": "srv", "disabled": True},
        },
    )
    servers, problems = read_file(path)
    assert problems == []
    files, web, typed, off = (servers[n] for n in ("files", "web", "typed", "off"))
    assert (files.transport, files.command, files.args) == ("stdio", "npx", ("-y", "srv"))
    assert files.env == {"T": "${TOKEN}"}  # kept as a reference, never resolved here
    assert files.timeout == 60.0
    assert files.source == str(path)
    assert files.cwd is None
    assert (web.transport, web.headers) == ("http", {"A": "Bearer ${K}"})
    assert (typed.transport, typed.timeout) == ("http", 5.0)
    assert off.disabled


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ({"command": "x", "disable": True}, "disable", "Extra inputs"),
        ({"args": ["a"]}, "", "needs command"),
        ({"command": "x", "url": "http://h"}, "", "not both"),
        ({"url": "ftp://h"}, "", "http://"),
        ({"type": "http", "command": "x"}, "", "not both"),
        ({"command": "x", "timeout": 0}, "timeout", "greater than 0"),
        ({"command": "x", "headers": {"A": "b"}}, "", "headers are for HTTP"),
        ({"command": "x", "env": {"A": 1}}, "env.A", "string"),
        ("npx srv", "", "dictionary"),
    ],
)
def test_a_bad_entry_is_one_line_naming_file_and_key(
    tmp_path: Path, entry: object, key: str, words: str
) -> None:
    path = tmp_path / "mcp.json"
    with pytest.raises(McpConfigError) as caught:
        parse_entry("srv", entry, path)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: mcpServers.srv{'.' + key if key else ''}: ")
    assert words in line
    assert line.endswith("skipped")


def test_a_bad_entry_or_name_leaves_the_other_servers_loaded(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        {"good": {"command": "a"}, "bad": {"comand": "b"}, "no spaces": {"command": "c"}},
    )
    servers, problems = read_file(path)
    assert list(servers) == ["good"]
    assert len(problems) == 2
    assert "mcpServers.bad.comand" in problems[0]
    assert "mcpServers.no spaces" in problems[1]


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"servers": {}}'])
def test_a_broken_file_is_one_line_and_nothing_else_breaks(tmp_path: Path, text: str) -> None:
    (tmp_path / "mcp.json").write_text(text)
    servers, problems = read_file(tmp_path / "mcp.json")
    assert servers == {}
    assert len(problems) == 1
    assert str(tmp_path / "mcp.json") in problems[0]
    assert read_file(tmp_path / "missing.json") == ({}, [])


def test_the_files_are_in_the_config_dir_and_the_folders_dot_jupyter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "conf"))
    assert user_config_path() == tmp_path / "conf" / "mibyan" / "mcp.json"
    assert folder_config_path(tmp_path) == tmp_path.resolve() / ".jupyter" / "mcp.json"


def test_the_user_wins_a_name_both_files_have_and_the_folder_adds(tmp_path: Path) -> None:
    user = write(tmp_path / "user.json", {"same": {"command": "mine"}})
    folder = tmp_path / "nb"
    write(folder_config_path(folder), {"same": {"command": "theirs"}, "extra": {"command": "x"}})
    config = load_config(folder, user_file=user)
    assert config.servers["same"].command == "mine"
    assert not config.from_folder("same")
    assert config.from_folder("extra")
    assert config.servers["extra"].cwd == str(folder.resolve())  # a folder's server starts there
    assert config.folder_file == folder_config_path(folder)
    assert len(config.problems) == 1
    assert "the user's server is used" in config.problems[0]
    assert config.folder_digest is not None
    assert len(config.folder_digest) == 64


def test_without_a_folder_file_only_the_users_servers(tmp_path: Path) -> None:
    user = write(tmp_path / "user.json", {"a": {"command": "x", "cwd": "sub"}})
    config = load_config(tmp_path, user_file=user)
    assert list(config.servers) == ["a"]
    assert config.folder_file is None
    assert config.servers["a"].cwd == "sub"  # the user's file: as written


def test_what_a_server_starts_is_shown_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOWN_API_KEY", "sk-literal-secret-123")
    spec = parse_entry(
        "s", {"command": "srv", "args": ["--key", "sk-literal-secret-123", "a b"]}, Path("f")
    )
    assert starts(spec) == "srv --key [redacted] 'a b'"
    web = parse_entry("w", {"url": "https://h/mcp"}, Path("f"))
    assert starts(web) == "https://h/mcp"


def test_editing_the_users_file_keeps_other_keys_and_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "mcp.json"
    edit_user_file(lambda servers: servers.update(a={"command": "x"}), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    document = json.loads(path.read_text())
    document["other"] = {"kept": True}
    path.write_text(json.dumps(document))
    path.chmod(0o640)
    edit_user_file(lambda servers: servers.pop("a"), path)
    assert json.loads(path.read_text()) == {"mcpServers": {}, "other": {"kept": True}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # a mode the user chose is kept
    assert [p.name for p in path.parent.iterdir()] == ["mcp.json"]  # no temporary left
    path.write_text("{broken")
    with pytest.raises(McpConfigError, match="cannot be read as JSON"):
        edit_user_file(lambda servers: None, path)
    assert path.read_text() == "{broken"
