"""The view's side of batch approvals and tool cards (issue 11, parts 1, 4, 5): every
question of a batch is on the page at once, "Approve all" / "Deny all" decide only the
view's own pending calls (the message is untrusted), code-running calls say what approving
means, and cards and messages carry their timing, code and usage. The last test drives the
real loop through the cell's approver with the view's clicks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from view_support import HEADER, Recorder, click, record_comms, reply_events

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    ApprovalGate,
    ApprovalRequest,
    Call,
    Reply,
    ScriptedModel,
    ToolMessage,
    tool,
)
from mibyan_jupyter.core.approval import Approved, Decision, Denied
from mibyan_jupyter.core.events import (
    ApprovalRequested,
    ApprovalResolved,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, FunctionCall, ToolCall, Usage
from mibyan_jupyter.jupyter.cell.approver import CellApprover
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.jupyter.view.tool_cards import POWERS


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def asking_view(*names: str) -> tuple[AgentView, list[tuple[str, Decision]]]:
    """A view with one pending approval per name (calls c1, c2, ...), and the decisions
    its clicks hand on."""
    view = AgentView(HEADER)
    decided: list[tuple[str, Decision]] = []
    view.on_decision(lambda call_id, decision: decided.append((call_id, decision)))
    for index, name in enumerate(names, 1):
        args = {"code": f"print({index})"} if name == "run_python" else {"path": f"{index}.txt"}
        view(ToolExecutionStart(call_id=f"c{index}", name=name, args=args))
        view(ApprovalRequested(call_id=f"c{index}", name=name, args=args, reason="side effects"))
    return view, decided


def test_every_question_of_a_batch_is_on_the_page_at_once(recorder: Recorder) -> None:
    view, _ = asking_view("write_file", "write_file", "run_python")
    view._outbox.flush()
    approvals = recorder.ops("approval")
    assert [op["id"] for op in approvals] == ["c1", "c2", "c3"]
    assert "powers" not in approvals[0]
    assert approvals[2]["powers"] == POWERS  # code runs as the user: said on the card
    assert "print(3)" in approvals[2]["args"]


def test_approve_all_decides_only_the_views_own_pending_calls_once(recorder: Recorder) -> None:
    view, decided = asking_view("write_file", "write_file", "write_file")
    view(ApprovalResolved(call_id="c2", name="write_file", approved=False))  # decided already
    hostile: list[Any] = ["c3", "c1", "c3", "elsewhere", 7, {"id": "c1"}, ["c1"], None]
    click(view, {"type": "decide_all", "action": "approve", "call_ids": hostile, "reason": ""})
    assert [(c, type(d)) for c, d in decided] == [("c3", Approved), ("c1", Approved)]
    assert all(d.scope == "once" for _, d in decided)
    click(view, {"type": "decide_all", "action": "approve", "call_ids": ["c1", "c3"]})
    click(view, {"type": "decision", "call_id": "c1", "action": "deny", "scope": "once"})
    assert len(decided) == 2  # a second click on a decided call is dropped


@pytest.mark.parametrize(
    "content",
    [
        {"type": "decide_all", "action": "approve"},
        {"type": "decide_all", "action": "approve", "call_ids": "c1"},
        {"type": "decide_all", "action": "allow", "call_ids": ["c1"]},
        {"type": "decide_all", "action": None, "call_ids": ["c1"]},
    ],
)
def test_a_malformed_approve_all_decides_nothing(recorder: Recorder, content: Any) -> None:
    view, decided = asking_view("write_file")
    click(view, content)
    assert decided == []
    click(view, {"type": "decide_all", "action": "approve", "call_ids": ["c1"]})
    assert [c for c, _ in decided] == ["c1"]  # the view still answers a good one


def test_deny_all_carries_its_reason_cut_to_the_limit(recorder: Recorder) -> None:
    view, decided = asking_view("write_file", "write_file")
    click(
        view,
        {"type": "decide_all", "action": "deny", "call_ids": ["c1", "c2"], "reason": " no " * 3000},
    )
    assert [c for c, _ in decided] == ["c1", "c2"]
    for _, decision in decided:
        assert isinstance(decision, Denied)
        assert decision.reason is not None
        assert decision.reason.startswith("no")
        assert len(decision.reason) <= 2000


def call(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps(args)))


def test_tool_cards_carry_code_timing_and_the_result_time(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(MessageStart(message=AssistantMessage()))
    calls = [
        call("p1", "run_python", {"code": "x = 1\nprint(x)"}),
        call("s1", "run_shell", {"command": "ls -la"}),
        call("w1", "write_file", {"path": "a.txt", "text": "hi"}),
    ]
    usage = Usage(input=1200, cache_read=300, output=45, cost=0.0021)
    view(MessageEnd(message=AssistantMessage(content="Running.", tool_calls=calls, usage=usage)))
    view(ToolExecutionStart(call_id="p1", name="run_python", args={"code": "x = 1\nprint(x)"}))
    done = ToolMessage(tool_call_id="p1", name="run_python", content="1")
    view(ToolExecutionEnd(call_id="p1", name="run_python", result=done, is_error=False))
    view._outbox.flush()
    cards = {op["id"]: op for op in recorder.ops("tool")}
    assert cards["p1"]["args"] == "x = 1\nprint(x)"
    assert cards["p1"]["lang"] == "python"
    assert cards["s1"]["args"] == "ls -la"
    assert cards["s1"]["lang"] == "shell"
    assert "lang" not in cards["w1"]
    assert '"path": "a.txt"' in cards["w1"]["args"]
    assert {op["msg"] for op in cards.values()} == {"a1"}  # grouped under their message
    [running] = [op for op in recorder.ops("status") if op["status"] == "running"]
    assert running["started"] > 1_600_000_000  # Unix time, for the card's "started" clock
    [result] = recorder.ops("result")
    assert 0 <= result["seconds"] < 5
    [stats] = recorder.ops("stats")
    assert stats == {
        "op": "stats",
        "id": "a1",
        "input": 1500,
        "output": 45,
        "cost": 0.0021,
        "seconds": stats["seconds"],
    }
    assert 0 <= stats["seconds"] < 5


def test_a_reply_with_an_unknown_price_says_so(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    for event in reply_events(["Hello"]):
        view(event)
    view._outbox.flush()
    [stats] = recorder.ops("stats")
    assert stats["cost"] is None  # unknown, never shown as $0


def test_an_approval_restarts_the_cards_clock(recorder: Recorder) -> None:
    view, _ = asking_view("write_file")
    view(ApprovalResolved(call_id="c1", name="write_file", approved=True))
    view._outbox.flush()
    statuses = [op for op in recorder.ops("status") if op["id"] == "c1"]
    assert [op["status"] for op in statuses] == ["running", "awaiting approval", "approved"]
    assert statuses[2]["started"] >= statuses[0]["started"]  # timing counts from approval
    assert "started" not in statuses[1]


async def test_approve_all_through_the_cells_approver_runs_the_batch(
    recorder: Recorder,
) -> None:
    written: list[str] = []

    @tool
    def write(path: str) -> str:
        """Write a file.

        Args:
            path: where.
        """
        written.append(path)
        return f"wrote {path}"

    view = AgentView(HEADER)
    loop = asyncio.get_running_loop()
    approver = CellApprover(view, loop, headless_wait=30)
    click(view, {"type": "rendered", "next": 0})
    model = ScriptedModel(
        [Reply(calls=[Call("write", {"path": p}, id=f"w{i}") for i, p in enumerate("abc")]), "ok"]
    )
    agent = Agent(stream_fn=model, tools=[write], approval=ApprovalGate(approver=approver))
    agent.subscribe(view)
    run = asyncio.ensure_future(agent.prompt("write three"))
    for _ in range(200):
        if len(view._ops.pending_approvals) == 3:
            break
        await asyncio.sleep(0.01)
    assert view._ops.pending_approvals == {"w0", "w1", "w2"}  # all three cards at once
    assert written == []
    ids = ["w2", "w1", "w0"]
    click(view, {"type": "decide_all", "action": "approve", "call_ids": ids, "reason": ""})
    await asyncio.wait_for(run, 10)
    assert sorted(written) == ["a", "b", "c"]
    view._outbox.flush()
    decided = recorder.ops("decided")
    assert sorted(op["id"] for op in decided) == ["w0", "w1", "w2"]
    assert all(op["approved"] and "approved by you" in op["outcome"] for op in decided)
    runs = [op["status"] for op in recorder.ops("run")]
    last_wait = len(runs) - 1 - runs[::-1].index("awaiting_approval")
    assert runs[last_wait + 1 :] == ["running", "done"]  # running once nothing waits


async def test_a_headless_batch_says_so_once_and_denies_every_call(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    approver = CellApprover(view, asyncio.get_running_loop(), headless_wait=0.05)
    requests = [ApprovalRequest(f"c{n}", "write", {}, "side effects") for n in range(3)]
    signal = AbortSignal()
    answers = await asyncio.gather(*(approver(r, signal) for r in requests))
    assert all(isinstance(a, Denied) and a.decided_by == "policy" for a in answers)
    view._outbox.flush()
    notices = [op["text"] for op in recorder.ops("notice")]
    assert len([n for n in notices if "No front end answered" in n]) == 1


def test_a_denied_call_shows_no_run_time(recorder: Recorder) -> None:
    view, _ = asking_view("write_file")
    view(ApprovalResolved(call_id="c1", name="write_file", approved=False, reason="no"))
    denied = ToolMessage(tool_call_id="c1", name="write_file", content="denied", is_error=True)
    view(ToolExecutionEnd(call_id="c1", name="write_file", result=denied, is_error=True))
    view._outbox.flush()
    [result] = recorder.ops("result")
    assert "seconds" not in result
    assert recorder.ops("status")[-1]["status"] == "denied"
