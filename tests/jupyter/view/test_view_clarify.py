"""The ask card's text box and the ``clarify`` tool on a live view, answered by real comm
messages as the front end sends them: a click on a choice, a typed answer (untrusted:
only for a card with a box, cut to its limit, once), "Let the agent decide", and Stop
(the tool's task cancelled) marking the card stopped. The ops are the typed ones."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import TypeAdapter
from view_support import HEADER, Recorder, click, record_comms

from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.jupyter.cell.clarify import DECLINED, NO_ONE_CAN_ANSWER, clarify_tools
from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.jupyter.view.ask import TYPED, Answer, Choice, TextBox, ask
from mibyan_jupyter.jupyter.view.ops import ViewOp

CHOICES = [Choice("a", "Option A"), Choice("b", "Option B")]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


async def until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def typed(view: AgentView, ident: str, text: object) -> None:
    click(view, {"type": "answer", "ask_id": ident, "choice": "", "text": text})


def rendered_view() -> AgentView:
    view = AgentView(HEADER)
    click(view, {"type": "rendered", "next": 0})
    return view


async def test_a_typed_answer_is_taken_once_and_cut_to_the_limit(recorder: Recorder) -> None:
    view = rendered_view()
    box = TextBox("Type it", limit=10)
    task = asyncio.create_task(ask(view, "Which?", CHOICES, default="a", text=box))
    await until(lambda: recorder.ops("ask"))
    (card,) = recorder.ops("ask")
    assert card["text"] == {"placeholder": "Type it", "limit": 10}
    ident = card["id"]
    typed(view, ident, "   ")  # blank: ignored
    typed(view, ident, 42)  # not text: ignored
    click(view, {"type": "answer", "ask_id": ident, "choice": ""})  # no text at all
    await asyncio.sleep(0.3)
    assert not task.done()
    typed(view, ident, "  <b>the third one</b> please ")
    typed(view, ident, "a second answer")
    click(view, {"type": "answer", "ask_id": ident, "choice": "b"})
    assert await asyncio.wait_for(task, 5) == Answer(TYPED, "user", "<b>the thi")
    await asyncio.sleep(0.01)
    (answered,) = recorder.ops("answered")
    assert answered == {
        "op": "answered",
        "id": ident,
        "choice": "",
        "label": "<b>the thi",
        "by": "user",
    }
    adapter: TypeAdapter[ViewOp] = TypeAdapter(ViewOp)
    for op in recorder.ops():
        assert adapter.validate_python(op, strict=True) == op


async def test_text_is_refused_where_the_card_has_no_box(recorder: Recorder) -> None:
    view = rendered_view()
    task = asyncio.create_task(ask(view, "Which?", CHOICES, default="a"))
    await until(lambda: recorder.ops("ask"))
    (card,) = recorder.ops("ask")
    assert "text" not in card
    typed(view, card["id"], "something else")
    await asyncio.sleep(0.3)
    assert not task.done()
    click(view, {"type": "answer", "ask_id": card["id"], "choice": "b"})
    assert await asyncio.wait_for(task, 5) == Answer("b", "user")


async def test_stop_ends_the_wait_and_the_card_says_so(recorder: Recorder) -> None:
    view = rendered_view()
    task = asyncio.create_task(ask(view, "Which?", CHOICES, default="a", text=TextBox()))
    await until(lambda: recorder.ops("ask"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.01)
    (answered,) = recorder.ops("answered")
    assert answered["by"] == "stopped"
    typed(view, answered["id"], "too late")  # the card no longer takes answers
    assert len(recorder.ops("answered")) == 1


def clarify(view: AgentView | None, *, headless: bool = False) -> Tool:
    plan = SimpleNamespace(headless=headless, headless_wait=2.0)
    setting = ToolSetting(
        plan=plan,  # type: ignore[arg-type]
        agent=None,  # type: ignore[arg-type]
        approval=None,  # type: ignore[arg-type]
        namespace={},
        root=Path("."),
        view=view,
    )
    (made,) = clarify_tools(setting)
    assert (made.name, made.side_effects, made.sequential) == ("clarify", False, True)
    return made


async def call(made: Tool, args: dict[str, Any]) -> Any:
    result = made.execute("c1", made.validate(args), AbortSignal(), lambda _: None)
    assert not isinstance(result, str)
    return await result  # type: ignore[misc]


async def answer_with(recorder: Recorder, view: AgentView, args: dict[str, Any], reply: Any) -> Any:
    before = len(recorder.ops("ask"))
    task = asyncio.create_task(call(clarify(view), args))
    await until(lambda: len(recorder.ops("ask")) > before)
    card = recorder.ops("ask")[-1]
    reply(card)
    return card, await asyncio.wait_for(task, 5)


async def test_clarify_shows_the_choices_and_returns_the_one_clicked(recorder: Recorder) -> None:
    view = rendered_view()
    args = {"question": "Plot which year?", "choices": ["2023", " 2024 ", "2023", ""]}
    card, said = await answer_with(
        recorder,
        view,
        args,
        lambda c: click(view, {"type": "answer", "ask_id": c["id"], "choice": "c1"}),
    )
    assert card["question"] == "Plot which year?"
    labels = [choice["label"] for choice in card["choices"]]
    assert labels == ["2023", "2024", "Let the agent decide"], "blank and repeated left out"
    assert card["default"] == "skip"
    assert card["text"]["placeholder"] == "Or type another answer, then Enter"
    assert said == "The user chose: 2024"


async def test_clarify_returns_a_typed_answer_and_a_declined_one(recorder: Recorder) -> None:
    view = rendered_view()
    card, said = await answer_with(
        recorder, view, {"question": "Which file?"}, lambda c: typed(view, c["id"], "sales.csv")
    )
    assert [choice["value"] for choice in card["choices"]] == ["skip"]
    assert card["text"]["placeholder"] == "Type your answer, then Enter"
    assert said == "The user answered: sales.csv"
    _, said = await answer_with(
        recorder,
        view,
        {"question": "Which file?"},
        lambda c: click(view, {"type": "answer", "ask_id": c["id"], "choice": "skip"}),
    )
    assert said == DECLINED


async def test_clarify_without_a_view_or_headless_answers_at_once(recorder: Recorder) -> None:
    assert await call(clarify(None), {"question": "Which?"}) == NO_ONE_CAN_ANSWER
    view = AgentView(HEADER)
    assert await call(clarify(view, headless=True), {"question": "Which?"}) == NO_ONE_CAN_ANSWER
    assert recorder.ops("ask") == [], "nothing is asked where nobody can answer"


async def test_stop_while_the_question_waits_ends_the_run(recorder: Recorder) -> None:
    """``Agent.abort`` (the Stop button) while clarify waits: the wait ends, the call's
    result is "cancelled", the card says it was stopped, and the run ends aborted."""
    from mibyan_jupyter.core import Agent, Call, Reply, ScriptedModel
    from mibyan_jupyter.core.tools import CANCELLED

    view = rendered_view()
    model = ScriptedModel([Reply(calls=[Call("clarify", {"question": "Which?"})]), Reply("no")])
    agent = Agent(stream_fn=model, tools=[clarify(view)])
    run = asyncio.create_task(agent.prompt("go"))
    await until(lambda: recorder.ops("ask"))
    agent.abort("stopped by the user")
    added = await asyncio.wait_for(run, 5)
    (result,) = [m for m in added if m.role == "tool"]
    assert result.content == CANCELLED
    assert agent.state.last_end_reason == "aborted"
    await asyncio.sleep(0.01)
    assert [op["by"] for op in recorder.ops("answered")] == ["stopped"]
