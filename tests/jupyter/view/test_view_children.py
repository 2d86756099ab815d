"""A delegated child's nested card in the live view (jupyter/view/children.py): the child's
events go through a translator of its own into the parent's one outbox, ids scoped by the
child, the elements it makes marked ``child``, its bars kept out of the parent's footer;
clicks on its approval cards are the view's own (untrusted, checked: only a child's
pending call, once); what a running child tool prints reaches the child's card; the saved
transcript keeps the child folded under the call that started it."""

from __future__ import annotations

from typing import Any

import pytest
from view_support import Recorder, click, record_comms, reply_events, update

from mibyan_jupyter.core.approval import Approved, Decision
from mibyan_jupyter.core.events import (
    AgentEnd,
    ApprovalRequested,
    BudgetStatus,
    BudgetUpdated,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.stream import ToolCallStart
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.jupyter.view.children import ChildCard, ChildView


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


def parent_view() -> AgentView:
    return AgentView(ViewHeader("Fruit", "s-1", "fake:m", demo=False, context_window=1000))


def started_child(view: AgentView, budget: list[int] | None = None) -> ChildView:
    """The parent's delegate_task call "d1" is running and its child has started."""
    view(update(ToolCallStart(index=0, id="d1", name="delegate_task")))
    view(ToolExecutionStart(call_id="d1", name="delegate_task", args={"goal": "pears"}))
    card = ChildCard("child-1", "d1", "count the pears", ("run_python",), 50, "c0ffee")
    on_budget = (lambda: budget.append(1)) if budget is not None else None
    child = view.child(card, on_budget)
    child(MessageEnd(message=UserMessage(content="count the pears")))
    return child


def ask(child: ChildView, call_id: str = "call_1") -> None:
    child(update(ToolCallStart(index=0, id=call_id, name="run_python")))
    child(ToolExecutionStart(call_id=call_id, name="run_python", args={"code": "1"}))
    child(ApprovalRequested(call_id=call_id, name="run_python", args={"code": "1"}))


def test_a_childs_ops_are_scoped_and_made_in_its_card(sent: Recorder) -> None:
    view = parent_view()
    budget: list[int] = []
    child = started_child(view, budget)
    for event in reply_events(["Counting ", "now."]):
        child(event)
    ask(child)
    child(
        BudgetUpdated(
            budgets=(
                BudgetStatus(name="turns", used=2, limit=50),
                BudgetStatus(name="cost", used=0.25, limit=None),
            )
        )
    )
    (start,) = sent.ops("child_start")
    assert start == {
        "op": "child_start",
        "id": "child-1",
        "parent": "d1",
        "goal": "count the pears",
        "tools": ["run_python"],
        "max_turns": 50,
    }
    (user,) = [op for op in sent.ops("user") if op.get("child")]
    assert user == {"op": "user", "text": "count the pears", "child": "child-1"}
    message = next(op for op in sent.ops("assistant") if op.get("child"))
    assert message["id"].startswith("child-1/")
    assert sent.streamed("text", message["id"]) == "Counting now."
    tool = next(op for op in sent.ops("tool") if op["name"] == "run_python")
    assert (tool["id"], tool["child"]) == ("child-1/call_1", "child-1")
    (approval,) = sent.ops("approval")
    assert approval["id"] == "child-1/call_1"
    assert sent.ops("bar") == []  # the child's bars never reach the parent's footer
    statuses = sent.ops("child_status")
    assert statuses[-1] == {
        "op": "child_status",
        "id": "child-1",
        "status": "awaiting_approval",
        "turns": 2,
        "tokens": 0,
        "cost": 0.25,
    }
    assert budget == [1]  # the parent's bars follow the child's spend
    runs = [op["status"] for op in sent.ops("run")]
    assert runs[-1] == "awaiting_approval"  # the parent's status says someone waits


def decisions(view: AgentView) -> list[tuple[str, Decision]]:
    seen: list[tuple[str, Decision]] = []
    view.on_decision(lambda call_id, decision: seen.append((call_id, decision)))
    return seen


@pytest.mark.parametrize(
    "forged",
    [
        {"type": "decision", "call_id": "call_1", "action": "approve", "scope": "once"},
        {"type": "decision", "call_id": "child-2/call_1", "action": "approve", "scope": "once"},
        {"type": "decision", "call_id": "child-1/call_9", "action": "approve", "scope": "once"},
        {"type": "decision", "call_id": "child-1/", "action": "approve", "scope": "once"},
        {"type": "decide_all", "action": "approve", "call_ids": ["call_1", "child-1/x"]},
    ],
)
def test_only_a_childs_own_pending_call_can_be_decided(sent: Recorder, forged: Any) -> None:
    view = parent_view()
    seen = decisions(view)
    ask(started_child(view))
    click(view, forged)
    assert seen == []
    real = {"type": "decision", "call_id": "child-1/call_1", "action": "approve", "scope": "once"}
    click(view, real)
    click(view, real)  # a second click is ignored
    assert seen == [("child-1/call_1", Approved())]


def test_approve_all_decides_the_parents_and_the_childs_calls(sent: Recorder) -> None:
    view = parent_view()
    seen = decisions(view)
    view(update(ToolCallStart(index=1, id="p2", name="write_file")))
    view(ApprovalRequested(call_id="p2", name="write_file", args={}))
    ask(started_child(view))
    ids = ["p2", "child-1/call_1", "child-1/call_1", 7]
    click(view, {"type": "decide_all", "action": "approve", "call_ids": ids})
    assert [call for call, _ in seen] == ["p2", "child-1/call_1"]


def test_what_a_childs_running_tool_prints_reaches_its_card(sent: Recorder) -> None:
    view = parent_view()
    child = started_child(view)
    child(ToolExecutionStart(call_id="call_1", name="run_python", args={"code": "print(42)"}))
    view.tool_output("call_1", "stdout", "42\n")
    result = ToolMessage(tool_call_id="call_1", name="run_python", content="42")
    child(ToolExecutionEnd(call_id="call_1", name="run_python", result=result, is_error=False))
    view.tool_output("call_1", "stdout", "late\n")  # after its end: the parent's, unknown
    outputs = [op for op in sent.ops("tool_output") if "42" in op["text"]]
    assert [op["id"] for op in outputs] == ["child-1/call_1"]


def test_the_saved_transcript_folds_each_child_under_its_call(sent: Recorder) -> None:
    view = parent_view()
    child = started_child(view)
    child(MessageEnd(message=AssistantMessage(content="There are **7** pears.")))
    child(AgentEnd(messages=(), reason="completed"))
    open_child = view.child(ChildCard("child-2", "d2", "plums", (), 50))
    assert child.status == "completed"
    view.finish([], status="completed")
    assert open_child.status == "stopped"  # a child still open when the view finished
    assert sent.ops("child_status")[-1]["status"] == "stopped"
    call = ToolCall(id="d1", function=FunctionCall(name="delegate_task", arguments="{}"))
    messages = [
        UserMessage(content="count"),
        AssistantMessage(content="", tool_calls=(call,), stop_reason="tool_use"),
        ToolMessage(tool_call_id="d1", name="delegate_task", content="7 pears"),
        AssistantMessage(content="Seven."),
    ]
    bundle = render_transcript(
        messages,
        session=SessionMeta(id="s-1"),
        status="completed",
        children=view.children.transcripts(),
    )
    html = bundle["text/html"]
    assert html.count('<details class="mibyan-child"') == 1  # child-2 had no call here
    folded = html[html.index('<details class="mibyan-child"') :]
    assert "count the pears" in folded
    assert "<strong>7</strong> pears" in folded
    assert "c0ffee" in folded  # its own session, to export it alone
    assert (
        html.index("7 pears") < html.index('<details class="mibyan-child"') < html.index("Seven.")
    )
    assert "> There are **7** pears." in bundle["text/markdown"]
    assert "    There are **7** pears." in bundle["text/plain"]


def test_a_childs_spilled_result_shows_its_preview_without_a_load_that_cannot_work(
    sent: Recorder,
) -> None:
    """The child keeps a spilled result in its own store (in memory), which the view cannot
    page from: its card gets the preview (which names the size) and no Load button."""
    from mibyan_jupyter.core.results import MemoryResults, spill

    view = parent_view()
    child = started_child(view)
    big = "row\n" * 10_000
    kept = spill(
        ToolMessage(tool_call_id="c9", name="read_file", content=big), MemoryResults(), 16_000
    )
    child(ToolExecutionEnd(call_id="c9", name="read_file", result=kept, is_error=False))
    (result,) = [op for op in sent.ops("result") if op["id"] == "child-1/c9"]
    assert "spilled" not in result
    assert result["text"].startswith("[This result is")  # the preview, not the text
    view(
        ToolExecutionEnd(
            call_id="p1",
            name="read_file",
            result=spill(
                ToolMessage(tool_call_id="p1", name="read_file", content=big),
                MemoryResults(),
                16_000,
            ),
            is_error=False,
        )
    )
    (own,) = [op for op in sent.ops("result") if op["id"] == "p1"]
    assert own["spilled"] == len(big)  # the parent's own card keeps its Load
