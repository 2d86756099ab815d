"""The live view, kernel side: agent events in, widget messages out; front-end messages in,
callbacks out. No kernel: a recording comm stands in for it (docs/architecture.md, "Tests")."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from view_support import (
    HEADER,
    Recorder,
    click,
    record_comms,
    reply_events,
    update,
)

from mibyan_jupyter.core import Agent, Call, Reply, ScriptedModel, tool
from mibyan_jupyter.core.approval import (
    ApprovalGate,
    ApprovalRequest,
    Approved,
    Decision,
    Denied,
)
from mibyan_jupyter.core.events import (
    AgentEnd,
    ApprovalRequested,
    ApprovalResolved,
    BudgetStatus,
    BudgetUpdated,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, ToolMessage, Usage, UserMessage
from mibyan_jupyter.core.notices import CompactionNotice, FallbackNotice, RetryNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import TextDelta, ToolCallDelta, ToolCallStart
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


@tool
def run_python(code: str) -> str:
    """Run Python in the kernel.

    Args:
        code: The code.
    """
    return f"ran {len(code)} characters"


class ClickingApprover:
    """Approves through the view, as a user would: the click arrives as a custom message
    from the front end, then the decision reaches the approver through on_decision."""

    def __init__(self, view: AgentView, content: dict[str, Any]) -> None:
        self.view = view
        self.content = content
        self.decisions: list[tuple[str, Decision]] = []
        view.on_decision(lambda call_id, d: self.decisions.append((call_id, d)))

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        click(self.view, {"type": "decision", "call_id": request.call_id, **self.content})
        await asyncio.sleep(0)
        assert self.decisions, "the click did not reach on_decision"
        return self.decisions[-1][1]


def first_index(kinds: list[str], kind: str, start: int = 0) -> int:
    return kinds.index(kind, start)


async def test_a_real_run_streams_ops_in_order(recorder: Recorder) -> None:
    model = ScriptedModel(
        [
            Reply(
                thinking="Plan: run it.",
                text="Let me **run** that.",
                calls=[Call("run_python", {"code": "print(1 + 1)"}, id="c1")],
            ),
            "It printed `2`.",
        ],
        chunk_size=4,
    )
    view = AgentView(HEADER, risk_note=lambda n, a: f"{n} runs code")
    approver = ClickingApprover(view, {"action": "approve", "scope": "once", "reason": ""})
    agent = Agent(stream_fn=model, tools=[run_python], approval=ApprovalGate(approver=approver))
    view.display()
    agent.subscribe(view)
    await agent.prompt("add one and one")
    view.finish(agent.state.messages, status="completed")

    batches = recorder.batches()
    assert [b[0] for b in batches] == list(range(len(batches)))
    kinds = recorder.kinds()
    assert kinds[:2] == ["header", "user"]  # the prompt once, from its event
    assert kinds.count("user") == 1
    assert recorder.ops("header")[0] == {
        "op": "header",
        "title": "Explore the data",
        "session": "s-1234",
        "model": "demo",
        "demo": True,
    }
    # Streamed text and thinking arrive whole, as deltas, before the message's final HTML.
    assert recorder.streamed("thinking", "a1") == "Plan: run it."
    assert recorder.streamed("text", "a1") == "Let me **run** that."
    assert recorder.streamed("args", "c1") == '{"code": "print(1 + 1)"}'
    # The streamed text is rendered as blocks (a program over it), so the final op has no HTML.
    blocks = recorder.ops("blocks")[0]
    assert blocks == {"op": "blocks", "id": "a1", "chars": 20, "blocks": "<p7<s~2 3>~2 6>"}
    assert recorder.ops("final")[0]["html"] == ""
    # The card, its approval and the result, in the order they happened.
    order = [
        first_index(kinds, "assistant"),
        first_index(kinds, "tool"),
        first_index(kinds, "final"),
        first_index(kinds, "approval"),
        first_index(kinds, "decided"),
        first_index(kinds, "result"),
    ]
    assert order == sorted(order)
    approval = recorder.ops("approval")[0]
    assert approval["args"] == "print(1 + 1)"
    assert approval["risk"] == "run_python runs code"
    assert recorder.ops("decided")[0]["outcome"] == "approved by you"
    statuses = [op["status"] for op in recorder.ops("status") if op["id"] == "c1"]
    assert statuses == ["running", "awaiting approval", "approved", "done"]
    runs = [op["status"] for op in recorder.ops("run")]
    assert runs == ["awaiting_approval", "running", "done"]
    assert recorder.ops("result")[0]["text"] == "ran 12 characters"
    assert approver.decisions == [("c1", Approved(scope="once"))]
    # Budget bars, and the context bar from the reply's usage against the window.
    bars = {op["name"]: op for op in recorder.ops("bar")}
    assert set(bars) == {"turns", "total_tokens", "cost", "context"}
    assert bars["turns"]["label"] == "2 / 500"
    assert bars["context"] == {
        "op": "bar",
        "name": "context",
        "title": "context",
        "label": "100 / 1,000",
        "fraction": 0.1,
    }
    assert recorder.sent[-1].msg_type == "comm_close"


def test_structural_ops_flush_pending_text_first(recorder: Recorder) -> None:
    """With no running loop and a long interval, text waits; a tool card pushes it out
    ahead of itself, in one message."""
    view = AgentView(HEADER, flush_interval=3600)  # not displayed: no flush yet
    events = list(reply_events(["Checking ", "now "]))
    for event in events[:3]:  # start, text start, first delta: flushed at the leading edge
        view(event)
    view(events[3])  # within the interval: held
    assert recorder.streamed("text", "a1") == "Checking "
    view(update(ToolCallStart(index=0, id="c9", name="search")))
    last = recorder.unpacked()[-1]
    assert [op["op"] for op in last] == ["text", "tool"]
    assert last[0]["text"] == "now "


def test_budget_bars_move_with_each_update(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    for used in (1, 2):
        view(
            BudgetUpdated(
                budgets=(
                    BudgetStatus(name="turns", used=used, limit=4),
                    BudgetStatus(name="input_tokens", used=10, limit=None),
                    BudgetStatus(name="total_tokens", used=1500 * used, limit=None),
                    BudgetStatus(name="cost", used=0.25 * used, limit=1.0),
                )
            )
        )
    bars = recorder.ops("bar")
    assert [(b["name"], b["label"], b["fraction"]) for b in bars] == [
        ("turns", "1 / 4", 0.25),
        ("total_tokens", "1,500", None),
        ("cost", "$0.25 / $1.00", 0.25),
        ("turns", "2 / 4", 0.5),
        ("total_tokens", "3,000", None),
        ("cost", "$0.50 / $1.00", 0.5),
    ]


def test_context_bar_counts_cached_input(recorder: Recorder) -> None:
    header = ViewHeader("", "s", "m", demo=False, context_window=None)
    view = AgentView(header)
    usage = Usage(input=300, cache_read=600, cache_write=100, output=50)
    view(MessageEnd(message=AssistantMessage(content="ok", usage=usage)))
    assert recorder.ops("bar") == [
        {"op": "bar", "name": "context", "title": "context", "label": "1,000", "fraction": None}
    ]


def test_retry_and_fallback_clear_the_partial_reply(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    events = list(reply_events(["first try"]))
    for event in events[:3]:
        view(event)
    view(update(ToolCallStart(index=0, id="c1", name="search")))
    view(update(ToolCallDelta(index=0, delta='{"q": ')))
    view(RetryNotice(attempt=2, max_attempts=5, delay=1.5, error_kind="rate_limit", message="429"))
    clear = recorder.ops("clear")[0]
    assert clear == {"op": "clear", "id": "a1", "calls": ["c1"]}
    notice = recorder.ops("notice")[0]
    assert notice["kind"] == "retry"
    assert notice["level"] == "warning"
    assert "attempt 2 of 5" in notice["text"]
    assert "rate_limit" in notice["text"]
    view(update(TextDelta(delta="second try")))
    view(MessageEnd(message=AssistantMessage(content="second try")))
    ops = recorder.ops()
    after = ops[ops.index(clear) :]
    # "try" of the first attempt was held back (no space after it yet): it is dropped, never
    # appended to the second attempt's text.
    assert "".join(op["text"] for op in after if op["op"] == "text") == "second try"
    view(MessageStart(message=AssistantMessage()))
    view(update(TextDelta(delta="third")))
    view(FallbackNotice(from_model="big", to_model="small", reason="overloaded"))
    view(
        CompactionNotice(
            messages_before=40, messages_after=8, tokens_before=9000, tokens_after=2000
        )
    )
    notices = recorder.ops("notice")
    assert [n["kind"] for n in notices] == ["retry", "fallback", "compaction"]
    assert notices[1]["text"] == "Switched from big to small: overloaded"
    assert "40 → 8 messages, 9,000 → 2,000 tokens" in notices[2]["text"]
    assert len(recorder.ops("clear")) == 2


def test_notices_queued_prompts_and_steering_messages(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view.show_queued("and plot it", "steer")
    view.show_notice("No front end answered.", level="warning")
    view(MessageEnd(message=UserMessage(content="first")))  # the cell's own prompt: shown once
    view(MessageEnd(message=UserMessage(content="and plot it")))  # injected steering
    assert recorder.ops("queued") == [{"op": "queued", "mode": "steer", "text": "and plot it"}]
    assert recorder.ops("notice") == [
        {"op": "notice", "level": "warning", "kind": "note", "text": "No front end answered."}
    ]
    assert [op["text"] for op in recorder.ops("user")] == ["first", "and plot it"]


def test_errors_and_stops_are_noticed(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(MessageEnd(message=AssistantMessage(stop_reason="error", error_message="HTTP 500")))
    view(MessageEnd(message=AssistantMessage(content="half", stop_reason="aborted")))
    view(AgentEnd(messages=(), reason="budget_exhausted"))
    assert [(n["level"], n["kind"]) for n in recorder.ops("notice")] == [
        ("error", "error"),
        ("info", "stop"),
        ("warning", "budget"),
    ]
    assert "HTTP 500" in recorder.ops("notice")[0]["text"]
    assert recorder.ops("run")[-1] == {"op": "run", "status": "done"}


def test_tool_card_images_only_valid_png(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    outputs = [
        {"output_type": "display_data", "data": {"image/png": PNG}, "metadata": {}},
        {"output_type": "display_data", "data": {"image/png": '" onerror="alert(1)'}},
        {"output_type": "execute_result", "data": {"image/png": "PHN2Zz48L3N2Zz4="}},  # <svg>
        {"output_type": "stream", "name": "stdout", "text": "hi"},
        {"output_type": "display_data", "data": {"image/png": [PNG[:20], PNG[20:]]}},  # dup
    ]
    result = ToolMessage(tool_call_id="c1", name="run_python", content="x" * 2500)
    result = result.model_copy(update={"details": {"outputs": outputs}})
    view(ToolExecutionStart(call_id="c1", name="run_python", args={"code": "plot()"}))
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=result, is_error=False))
    card = recorder.ops("tool")[0]
    assert card["args"] == "plot()"
    op = recorder.ops("result")[0]
    assert op["images"] == [f"data:image/png;base64,{PNG}"]
    assert len(op["text"]) == 2000
    assert op["more"] == 500


def test_denied_calls_stay_denied(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view(ToolExecutionStart(call_id="c1", name="shell", args={"command": "rm -rf /"}))
    view(
        ApprovalResolved(
            call_id="c1", name="shell", approved=False, decided_by="policy", reason="a rule"
        )
    )
    result = ToolMessage(tool_call_id="c1", content="denied: a rule", is_error=True)
    view(ToolExecutionEnd(call_id="c1", name="shell", result=result, is_error=True))
    statuses = [op["status"] for op in recorder.ops("status")]
    assert statuses == ["running", "denied", "denied"]
    assert recorder.ops("decided")[0]["outcome"] == "denied by policy: a rule"


def ask(view: AgentView, call_id: str = "c1") -> None:
    view(ToolExecutionStart(call_id=call_id, name="write_file", args={"path": "a.txt"}))
    view(ApprovalRequested(call_id=call_id, name="write_file", args={"path": "a.txt"}))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"action": "approve", "scope": "once"}, Approved(scope="once")),
        ({"action": "approve", "scope": "session"}, Approved(scope="session")),
        ({"action": "approve", "scope": "always"}, Approved(scope="always")),
        ({"action": "deny", "scope": "once", "reason": "  not today "}, Denied("not today")),
        ({"action": "deny", "scope": "once", "reason": ""}, Denied(None)),
        ({"action": "deny", "scope": "bogus"}, Denied(None, scope="once")),
    ],
)
def test_decisions_from_the_front_end(
    recorder: Recorder, content: dict[str, Any], expected: Decision
) -> None:
    view = AgentView(HEADER)
    got: list[tuple[str, Decision]] = []
    view.on_decision(lambda call_id, decision: got.append((call_id, decision)))
    ask(view)
    click(view, {"type": "decision", "call_id": "c1", **content})
    assert got == [("c1", expected)]


def test_stale_double_and_malformed_decisions_are_ignored(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    got: list[str] = []
    view.on_decision(lambda call_id, decision: got.append(call_id))
    click(view, {"type": "decision", "call_id": "c1", "action": "approve", "scope": "once"})
    ask(view)
    for content in (
        {"type": "decision", "call_id": 7, "action": "approve"},
        {"type": "decision", "call_id": "c1", "action": "maybe"},
        {"type": "decision", "call_id": "c1", "action": "approve", "scope": ["x"]},
        "not a mapping",
    ):
        view._on_front_end(view._widget, content, [])
    assert got == ["c1"]  # the list-valued scope still decides, as "once"
    click(view, {"type": "decision", "call_id": "c1", "action": "deny", "scope": "once"})
    assert got == ["c1"]


def test_stop_and_rendered_reach_their_callbacks(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    stops: list[int] = []
    renders: list[int] = []
    view.on_stop(lambda: stops.append(1))
    view.on_rendered(lambda: renders.append(1))
    view.display()
    assert not view.rendered
    click(view, {"type": "stop"})
    click(view, {"type": "rendered", "next": 0})
    click(view, {"type": "rendered", "next": 1})  # a second view of the same widget
    assert stops == [1]
    assert renders == [1]
    assert view.rendered
    view.on_rendered(lambda: renders.append(2))  # registered late: called at once
    assert renders == [1, 2]


def test_rendered_replays_what_the_front_end_missed(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view.display()
    view.show_notice("one")
    view.show_notice("two")
    sent = recorder.batches()
    assert [b[0] for b in sent] == [0, 1, 2]
    click(view, {"type": "rendered", "next": 1})
    assert recorder.batches()[3:] == sent[1:]
    click(view, {"type": "rendered", "next": 3})
    assert len(recorder.batches()) == 5  # nothing missed, nothing sent


def test_a_failing_callback_does_not_break_the_view(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    called: list[str] = []

    def boom() -> None:
        raise RuntimeError("callback bug")

    view.on_stop(boom)
    view.on_stop(lambda: called.append("second"))
    click(view, {"type": "stop"})
    assert called == ["second"]


def test_without_loop_or_front_end_or_shell(recorder: Recorder) -> None:
    """Plain Python: no running loop, no IPython, nobody answering. Nothing fails or waits,
    finish() closes the comm, later events are ignored."""
    view = AgentView(HEADER)
    view.display()
    for event in reply_events(["no ", "loop ", "here"]):
        view(event)
    ask(view)
    view.finish(
        [UserMessage(content="hi"), AssistantMessage(content="no loop here")], status="error"
    )
    view.finish([], status="completed")  # idempotent
    sent_before = len(recorder.sent)
    view(MessageEnd(message=AssistantMessage(content="late")))
    view.show_notice("late")
    assert len(recorder.sent) == sent_before
    assert recorder.streamed("text", "a1") == "no loop here"
    assert [s.msg_type for s in recorder.sent].count("comm_close") == 1
    assert not view.rendered


def test_public_names_and_front_end_files(recorder: Recorder) -> None:
    import mibyan_jupyter.jupyter.view as package
    from mibyan_jupyter.jupyter.view.widget import AgentWidget

    assert package.__all__ == ["AgentView", "ViewHeader"]  # the transcript is export's
    widget = AgentWidget()
    assert "export default { render };" in widget._esm
    assert ".mibyan-view {" in widget._css
    opened = [s.data["state"] for s in recorder.sent if s.msg_type == "comm_open"]
    state = next(state for state in opened if "_esm" in state)
    assert {k for k in state if not k.startswith("_")} <= {"layout", "tabbable", "tooltip"}


def test_streamed_text_never_goes_through_widget_state(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    view.display()
    for event in reply_events(["a "] * 50):
        view(event)
    view.finish([], status="completed")
    updates = [s for s in recorder.sent if s.data.get("method") in ("update", "echo_update")]
    assert updates == []
