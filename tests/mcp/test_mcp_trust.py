"""Trust in a folder's MCP file (mibyan_jupyter/mcp/trust.py): per file and sha256 of its
bytes, kept owner-only in the user's data dir, configured folders, and the write check."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mibyan_jupyter.mcp.trust import TrustRefused, TrustStore, env_folders, folder_of, trust_path


@pytest.fixture
def folder_file(tmp_path: Path) -> Path:
    path = tmp_path / "project" / ".jupyter" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {"a": {"command": "srv"}}}')
    return path


def test_trust_is_per_file_and_bytes_and_a_changed_file_asks_again(
    tmp_path: Path, folder_file: Path
) -> None:
    store = TrustStore(tmp_path / "data" / "mcp-trust.json")
    assert store.state(folder_file) == "untrusted"
    assert not store.is_trusted(folder_file)
    store.trust(folder_file)
    assert store.state(folder_file) == "trusted"
    assert TrustStore(store.path).is_trusted(folder_file)  # kept in the file, not in memory
    folder_file.write_text('{"mcpServers": {"a": {"command": "rm -rf ~"}}}')
    assert store.state(folder_file) == "changed"
    assert not store.is_trusted(folder_file)
    store.trust(folder_file)
    assert [entry.file for entry in store.entries()] == [str(folder_file.resolve())]  # replaced
    assert store.forget(folder_file)
    assert not store.is_trusted(folder_file)
    assert not store.forget(folder_file)


def test_trust_is_given_to_the_bytes_the_user_was_shown(tmp_path: Path, folder_file: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    shown = "0" * 64  # the digest of what the question showed, not of the file now
    store.trust(folder_file, shown)
    assert store.state(folder_file) == "changed"
    assert store.is_trusted(folder_file, shown)


def test_the_trust_file_is_owner_only_and_atomic(tmp_path: Path, folder_file: Path) -> None:
    path = tmp_path / "data" / "mcp-trust.json"
    TrustStore(path).trust(folder_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["mcp-trust.json"]
    entry = json.loads(path.read_text())["trusted"][0]
    assert entry["file"] == str(folder_file.resolve())
    assert len(entry["sha256"]) == 64


@pytest.mark.parametrize("text", ["{broken", '{"trusted": [{"file": "x"}]}', "[]"])
def test_a_damaged_trust_file_trusts_nothing(tmp_path: Path, folder_file: Path, text: str) -> None:
    path = tmp_path / "trust.json"
    path.write_text(text)
    assert TrustStore(path).state(folder_file) == "untrusted"


def test_a_configured_folder_is_trusted_whatever_its_file_holds(
    tmp_path: Path, folder_file: Path
) -> None:
    store = TrustStore(tmp_path / "trust.json", configured=[folder_file.parent.parent])
    assert store.state(folder_file) == "configured"
    assert store.is_trusted(folder_file)
    assert not (tmp_path / "trust.json").exists()  # nothing written for it
    other = TrustStore(tmp_path / "trust.json", configured=[tmp_path / "elsewhere"])
    assert not other.is_trusted(folder_file)


def test_the_write_check_refuses_trust_and_writes_nothing(
    tmp_path: Path, folder_file: Path
) -> None:
    store = TrustStore(tmp_path / "trust.json", write_check=lambda: "code an agent ran")
    with pytest.raises(TrustRefused, match="trusting an MCP file refused: code an agent ran"):
        store.trust(folder_file)
    with pytest.raises(TrustRefused):
        store.forget(folder_file)
    assert not (tmp_path / "trust.json").exists()


def test_paths_and_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder_file: Path
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert trust_path() == tmp_path / "data" / "mibyan" / "mcp-trust.json"
    assert env_folders(f"/a{os.pathsep}{os.pathsep} /b") == ("/a", " /b")
    assert env_folders(None) == ()
    assert folder_of(folder_file) == folder_file.parent.parent.resolve()
