"""Delegation in a real ipykernel (issue 13, part 3): a cell with ``--tools
default,delegate`` whose model calls ``delegate_task`` twice in one message. The two
children run in parallel over loopback, each keeps its transcript in a child session of
the store (``link_kind='delegation'``, parent: the cell's session), the export of the
parent contains them, and Kernel > Interrupt while a child streams ends the child's
request and marks its session ended.

The fake server answers by who is asking: the parent (its request offers
``delegate_task``) or a child (its system prompt is the core's child prompt, its first user
message the goal)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_driver import KernelDriver

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply
from mibyan_jupyter.testing.scripts import Fault, RecordedRequest, ScriptItem

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

GOALS = ("count the apples", "count the pears")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class Router:
    """The model of the parent and of each child, told apart by their requests."""

    def __init__(self) -> None:
        self.child_reply: ScriptItem | None = None
        """What a child says after its tool call (default: an answer naming its goal)."""
        self.child_requests: list[RecordedRequest] = []
        self.child_tool = FakeCall("list_variables", {})

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        body = request.body or {}
        messages = body.get("messages") or []
        tools = {tool["function"]["name"] for tool in body.get("tools") or []}
        last = messages[-1]["role"] if messages else "user"
        if "delegate_task" in tools:  # the parent
            if last == "tool":
                return FakeReply("Both children reported back.")
            calls = [FakeCall("delegate_task", {"goal": goal}) for goal in GOALS]
            return FakeReply("Delegating.", calls=calls)
        self.child_requests.append(request)
        goal = next(_text(m["content"]) for m in messages if m["role"] == "user")
        if last != "tool":
            return FakeReply(calls=[self.child_tool])
        if self.child_reply is not None:
            return self.child_reply
        return FakeReply(f"Done: {goal}, 7 of them.")


@pytest.fixture
def router() -> Router:
    return Router()


@pytest.fixture
def server(router: Router) -> Iterator[FakeProviderServer]:
    with FakeProviderServer(fallback=router) as fake:
        yield fake


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    env = {"OPENAI_API_KEY": "sk-delegation-0001", "MIBYAN_MEMORY_DIR": str(tmp_path / "m")}
    driver = KernelDriver(tmp_path, env=env)
    try:
        assert (driver.run("%load_ext mibyan_jupyter").reply or {}).get("status") == "ok"
        yield driver
    finally:
        driver.close()


def cell(server: FakeProviderServer, prompt: str, extra: str = "") -> str:
    model = f"openai:fake@{server.base_url}"
    tools = "" if "--tools" in extra else "--tools inspect,delegate"
    return f"%%agent --session new --model {model} {tools} {extra}\n{prompt}"


def children(kernel: KernelDriver) -> list[tuple[Any, ...]]:
    return kernel.query(
        "SELECT id, parent_id, title, status, end_reason, config FROM sessions"
        " WHERE link_kind = 'delegation' ORDER BY title"
    )


def test_two_parallel_children_are_stored_as_child_sessions_and_exported(
    kernel: KernelDriver, server: FakeProviderServer, router: Router, tmp_path: Path
) -> None:
    execution = kernel.run(cell(server, "Count the fruit, one child per kind."), timeout=90)
    assert (execution.reply or {}).get("status") == "ok", execution.text()
    assert "Both children reported back." in execution.text()
    ((parent_id,),) = kernel.query("SELECT id FROM sessions WHERE link_kind IS NULL")
    found = children(kernel)
    assert [row[2] for row in found] == list(GOALS)
    for child_id, parent, goal, status, end_reason, config in found:
        assert parent == parent_id
        assert (status, end_reason) == ("idle", "completed")
        recorded = json.loads(config)["delegation"]
        assert recorded["goal"] == goal
        assert recorded["child_id"].startswith("child-")
        roles = [
            r
            for (r,) in kernel.query(
                "SELECT role FROM messages WHERE session_id = ? ORDER BY seq", child_id
            )
        ]
        assert roles == ["user", "assistant", "tool", "assistant"], roles
        texts = kernel.query("SELECT text FROM messages WHERE session_id = ?", child_id)
        assert any(f"Done: {goal}" in text for (text,) in texts)
    # parallel: both children's first requests arrived before either's second
    firsts = sorted(r.number for r in router.child_requests)[:2]
    seconds = sorted(r.number for r in router.child_requests)[2:]
    assert max(firsts) < min(seconds)
    # the parent's result carries each child's answer; the parent's transcript is its own
    parent_texts = kernel.query(
        "SELECT text FROM messages WHERE session_id = ? AND role = 'tool'", parent_id
    )
    assert sorted(GOALS) == sorted(g for g in GOALS for (t,) in parent_texts if g in t)
    # the export of the parent contains each child's transcript; a child exports by its id
    out = tmp_path / "parent.md"
    exported = kernel.run(f"%agent export {parent_id} {out}")
    assert (exported.reply or {}).get("status") == "ok", exported.text()
    text = out.read_text()
    for child_id, _parent, goal, *_ in found:
        assert child_id[:8] in text
        assert f"Done: {goal}, 7 of them." in text
    notebook = tmp_path / "parent.ipynb"
    assert (kernel.run(f"%agent export {parent_id} {notebook}").reply or {})["status"] == "ok"
    cells = json.loads(notebook.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    for child_id, _parent, goal, *_ in found:
        assert any(child_id in text and goal in text for text in sources)  # its heading
        assert any(f"Done: {goal}, 7 of them." in text for text in sources)
    # listed under their parent only when asked; resume (last) stays on the parent
    listed = kernel.run("%agent sessions").text()
    assert parent_id[:8] in listed
    assert not any(child_id[:8] in listed for child_id, *_ in found)
    listed = kernel.run("%agent sessions --children").text()
    assert all(child_id[:8] in listed for child_id, *_ in found)
    assert f"(child of {parent_id[:8]})" in listed
    resumed = kernel.run("%agent resume").text()
    assert f"Resumed session {parent_id[:8]}" in resumed
    assert resumed.count('<details class="mibyan-child"') == 2  # folded under their calls
    alone = tmp_path / "child.md"
    kernel.run(f"%agent export {found[0][0]} {alone}")
    assert f"Done: {GOALS[0]}" in alone.read_text()


def _closed_by_client(server: FakeProviderServer) -> bool:
    for conn in server.playback.open_connections():
        try:
            if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b"":
                return False
        except BlockingIOError:
            return False
        except OSError:
            continue
    return True


@pytest.mark.parametrize("how", ["interrupt", "stop"])
def test_stopping_the_cell_while_children_stream_ends_their_requests_and_sessions(
    kernel: KernelDriver, server: FakeProviderServer, router: Router, how: str
) -> None:
    """Kernel > Interrupt (the cell ends with one line) and the view's Stop button (the
    cell ends normally) both reach the children: their requests are closed by the client
    at once, and their sessions are marked ended (aborted)."""
    router.child_reply = Fault(
        "stall", seconds=60.0, after_events=3, reply=FakeReply("halfway there " * 100)
    )
    execution = kernel.execute(cell(server, "Count the fruit, slowly."))

    def streaming() -> bool:
        return len(server.playback.open_connections()) == 2 and len(router.child_requests) >= 4

    kernel.wait(streaming, 60, "both children to stream their answers")
    assert not _closed_by_client(server)
    started = time.monotonic()
    if how == "interrupt":
        kernel.manager.interrupt_kernel()
    else:
        (view,) = kernel.view_comms()
        kernel.send_custom(view, {"type": "stop"})
    kernel.finish(execution, 30, "the stopped cell to end")
    assert time.monotonic() - started < 20  # not the server's 60 s stall
    status = (execution.reply or {}).get("status")
    assert status == ("error" if how == "interrupt" else "ok"), execution.text()
    kernel.wait(lambda: _closed_by_client(server), 10, "the children's requests to close")

    def ended() -> bool:
        rows = children(kernel)
        return len(rows) == 2 and all(row[3] == "idle" and row[4] for row in rows)

    kernel.wait(ended, 15, "both child sessions to be marked ended")
    assert {row[4] for row in children(kernel)} == {"aborted"}
    for child_id, *_ in children(kernel):  # the partial answer was kept
        texts = kernel.query("SELECT text FROM messages WHERE session_id = ?", child_id)
        assert any("halfway there" in text for (text,) in texts)


def test_without_a_front_end_a_childs_call_is_decided_by_the_policy(
    kernel: KernelDriver, server: FakeProviderServer, router: Router
) -> None:
    """Headless, the cell's approver decides a child's question as it does the parent's:
    denied, the reason recorded in the child's own session, and the run completes."""
    router.child_tool = FakeCall("run_python", {"code": "print(6 * 7)"})
    kernel.run("%config AgentMagics.headless_wait = 0.3")
    execution = kernel.run(cell(server, "Count the fruit.", "--tools python,delegate"), timeout=60)
    assert (execution.reply or {}).get("status") == "ok", execution.text()
    assert len(children(kernel)) == 2
    for child_id, *_ in children(kernel):
        rows = kernel.query(
            "SELECT name, decision, decided_by, reason FROM tool_calls WHERE session_id = ?",
            child_id,
        )
        assert [row[:3] for row in rows] == [("run_python", "denied", "policy")], rows
        assert "no one can click" in rows[0][3]


def test_delegate_turns_sets_each_childs_own_budget(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    refused = kernel.run(cell(server, "Count.", "--delegate-turns 0"))
    assert (refused.reply or {}).get("status") == "error"
    assert "--delegate-turns must be a positive integer" in refused.text()
    kernel.run("%config AgentMagics.delegate_turns = 7")
    execution = kernel.run(cell(server, "Count the fruit."), timeout=60)
    assert (execution.reply or {}).get("status") == "ok", execution.text()
    assert {json.loads(row[5])["max_turns"] for row in children(kernel)} == {7}
    before = {row[0] for row in children(kernel)}
    execution = kernel.run(cell(server, "Count again.", "--delegate-turns 1"), timeout=60)
    assert (execution.reply or {}).get("status") == "ok", execution.text()
    new = [row for row in children(kernel) if row[0] not in before]
    assert len(new) == 2
    assert {json.loads(row[5])["max_turns"] for row in new} == {1}
    assert {row[4] for row in new} == {"budget_exhausted"}  # one turn: the tool call, then stop
