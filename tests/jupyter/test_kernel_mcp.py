"""MCP tools in a real kernel: ``--tools mcp:NAME`` with a real stdio server (the SDK's
FastMCP, tests/mcp/servers/secret_echo.py) configured in a temporary Jupyter config dir, a
scripted model on loopback HTTP calling the server's tools; the approval card names the
server, a click approves, the headless policy denies, ``--approve auto`` runs; a secret
given as ``${VAR}`` reaches the server and never the store file, the view or an export; a
folder's file is not started untrusted, and its trust card starts it once clicked."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_driver import Execution, KernelDriver

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(180)]

SERVER = Path(__file__).parents[1] / "mcp" / "servers" / "secret_echo.py"
SECRET = "zq-opaque-value-9271-mcp"
"""Under a name nothing would take for a secret: only the ``${VAR}`` reference says it is."""
SECRET_VAR = "MCP_OPAQUE_VALUE"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    """One kernel for the file (its MCP server starts once and serves every cell)."""
    root = tmp_path_factory.mktemp("kernel-mcp")
    user_file = root / "conf" / "mibyan" / "mcp.json"
    user_file.parent.mkdir(parents=True)
    entry = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"PASS": f"${{{SECRET_VAR}}}"},
    }
    user_file.write_text(json.dumps({"mcpServers": {"sec": entry}}))
    env = {
        "JUPYTER_CONFIG_DIR": str(root / "conf"),
        "JUPYTER_DATA_DIR": str(root / "data"),
        "OPENAI_API_KEY": "sk-kernel-mcp-test-0001",
        "MIBYAN_MEMORY_DIR": str(root / "memory"),
        SECRET_VAR: SECRET,
    }
    driver = KernelDriver(root, env=env)
    try:
        assert driver.run("%load_ext mibyan_jupyter").reply["status"] == "ok"  # type: ignore[index]
        yield driver
    finally:
        driver.close()


def model(server: FakeProviderServer) -> str:
    return f"openai:fake@{server.base_url}"


def ok(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "ok", (execution.reply, execution.text())
    return execution.text()


def view_ops(kernel: KernelDriver, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(view comm id, op) of every op of ``kind`` the views were sent, once each."""
    found: dict[tuple[str, Any], tuple[str, dict[str, Any]]] = {}
    for message in kernel.comm_messages:
        batch = message.get("data", {}).get("content")
        for item in batch[1:] if isinstance(batch, list) else []:
            if isinstance(item, dict) and item.get("op") == kind:
                found.setdefault((message["comm_id"], item.get("id")), (message["comm_id"], item))
    return list(found.values())


def play_front_end(kernel: KernelDriver, answered: set[str]) -> None:
    for comm_id in kernel.view_comms():
        if comm_id not in answered:
            answered.add(comm_id)
            kernel.send_custom(comm_id, {"type": "rendered", "next": 0})


def results(kernel: KernelDriver, tool: str) -> list[tuple[str, str]]:
    """(decision, result text) of every call of ``tool``, in order."""
    return kernel.query(
        "SELECT c.decision, m.text FROM tool_calls c JOIN messages m ON m.session_id ="
        " c.session_id AND m.tool_call_id = c.call_id WHERE c.name = ? ORDER BY m.id",
        tool,
    )


def test_the_card_names_the_server_and_a_click_runs_it_with_the_secret_kept_out(
    kernel: KernelDriver, server: FakeProviderServer, tmp_path: Path
) -> None:
    calls = [
        FakeCall("sec__secret_seen", {"name": "PASS"}),
        FakeCall("sec__leak", {"name": "PASS"}),
    ]
    server.push(FakeReply(calls=calls), FakeReply("The server has it."))
    execution = kernel.execute(
        f"%%agent --model {model(server)} --tools mcp:sec\nCheck the secret."
    )
    answered: set[str] = set()

    def asked() -> bool:
        play_front_end(kernel, answered)
        return len(view_ops(kernel, "approval")) == 2

    kernel.wait(asked, 60, "two approval cards")
    cards = view_ops(kernel, "approval")
    assert {card["name"] for _, card in cards} == {"sec__secret_seen", "sec__leak"}
    assert {card.get("server") for _, card in cards} == {"server sec"}
    for view, card in cards:
        kernel.send_custom(
            view, {"type": "decision", "call_id": card["id"], "action": "approve", "scope": "once"}
        )
    kernel.finish(execution, 60, "the run after Approve")
    ok(execution)
    ((decision, seen),) = results(kernel, "sec__secret_seen")
    digest = hashlib.sha256(SECRET.encode()).hexdigest()[:12]
    assert decision == "approved"
    assert f"{len(SECRET)} characters, sha256 {digest}" in seen
    ((_, leaked),) = results(kernel, "sec__leak")
    assert "[redacted]" in leaked  # the server echoed the value; the store never got it
    exported = tmp_path / "out.ipynb"
    ok(kernel.run(f"%agent export last {exported}", timeout=60))
    stored = b"".join(p.read_bytes() for p in kernel.db_path.parent.glob("sessions.sqlite3*"))
    widget = json.dumps(kernel.comm_messages) + json.dumps(list(kernel.comms.values()))
    assert "sec__leak" in widget
    assert "sec__leak" in exported.read_text()
    for where, text in [
        ("store", stored.decode("latin-1")),
        ("view", widget),
        ("export", exported.read_text()),
    ]:
        assert SECRET not in text, where
    assert SECRET not in execution.text()


def test_headless_the_policy_denies_an_mcp_call_and_auto_or_a_rule_approves_it(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    kernel.run("%config AgentMagics.headless_wait = 0.3")
    server.push(FakeReply(calls=[FakeCall("sec__echo", {"text": "denied?"})]), FakeReply("ok"))
    ok(kernel.run(f"%%agent --model {model(server)} --tools mcp:sec\nEcho.", timeout=60))
    server.push(FakeReply(calls=[FakeCall("sec__echo", {"text": "hello mcp"})]), FakeReply("ok"))
    line = f"--model {model(server)} --tools mcp:sec --approve auto"
    ok(kernel.run(f"%%agent {line}\nEcho.", timeout=60))
    ok(kernel.run("%agent policy set sec__echo allow"))  # a per-tool rule, as for any tool
    server.push(FakeReply(calls=[FakeCall("sec__echo", {"text": "by rule"})]), FakeReply("ok"))
    try:
        ok(kernel.run(f"%%agent --model {model(server)} --tools mcp:sec\nEcho.", timeout=60))
    finally:
        ok(kernel.run("%agent policy reset sec__echo"))
    (denied, approved, ruled) = results(kernel, "sec__echo")
    assert denied[0] == "denied"
    assert "hello mcp" not in (denied[1] or "")
    assert approved == ("approved", "hello mcp")
    assert ruled == ("approved", "by rule")
    decided = kernel.query("SELECT decided_by FROM tool_calls WHERE name = 'sec__echo'")
    assert [row[0] for row in decided] == ["policy", "policy", "rule"]


def test_unknown_and_untrusted_servers_are_one_line_each(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    unknown = kernel.run(f"%%agent --model {model(server)} --tools mcp:nope\nHi.", timeout=60)
    assert (unknown.reply or {}).get("status") == "error"
    assert "unknown MCP server 'nope' in --tools; configured: sec" in unknown.text()
    assert "mibyan-transcript" in unknown.text()  # the live view ended, none left waiting
    folder_file = kernel.db_path.parent / ".jupyter" / "mcp.json"
    folder_file.parent.mkdir(exist_ok=True)
    entry = {"command": sys.executable, "args": [str(SERVER)]}
    folder_file.write_text(json.dumps({"mcpServers": {"here": entry}}))
    kernel.run("%config AgentMagics.headless_wait = 0.3")
    server.push(FakeReply("no tools here"))
    text = ok(kernel.run(f"%%agent --model {model(server)} --tools mcp:here\nHi.", timeout=60))
    assert f"{folder_file} is not trusted" in text
    assert "runs without MCP server(s) here" in text
    assert "here__echo" not in json.dumps(server.requests[-1].body)
    folder_file.unlink()


def test_the_trust_card_clicked_in_the_cell_starts_the_folders_server(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    folder_file = kernel.db_path.parent / ".jupyter" / "mcp.json"
    folder_file.parent.mkdir(exist_ok=True)
    entry = {"command": sys.executable, "args": [str(SERVER)]}
    folder_file.write_text(json.dumps({"mcpServers": {"mine": entry}}))
    kernel.run("%config AgentMagics.headless_wait = 20")
    server.push(FakeReply(calls=[FakeCall("mine__echo", {"text": "trusted"})]), FakeReply("ok"))
    line = f"--model {model(server)} --tools mcp:mine --approve auto"

    def cards() -> list[tuple[str, dict[str, Any]]]:
        return [item for item in view_ops(kernel, "ask") if "mcp.json" in item[1]["question"]]

    earlier = len(cards())  # a cell of an earlier test may have had one (answered "Not now")
    execution = kernel.execute(f"%%agent {line}\nEcho.")
    answered: set[str] = set()

    def asked() -> bool:
        play_front_end(kernel, answered)
        return len(cards()) > earlier or execution.done

    try:
        kernel.wait(asked, 30, "the trust card")
        (view, card), *others = cards()[earlier:]
        assert others == []
        assert str(folder_file) in card["question"]
        kernel.send_custom(view, {"type": "answer", "ask_id": card["id"], "choice": "trust"})
        kernel.finish(execution, 60, "the run after Trust")
        ok(execution)
        assert results(kernel, "mine__echo") == [("approved", "trusted")]
    finally:
        kernel.finish(execution, 60, "the cell")
        kernel.run("%config AgentMagics.headless_wait = 0.3")
        folder_file.unlink()
