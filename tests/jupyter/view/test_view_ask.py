"""The ask card: a question with choices on the live view, awaited by the kernel.

A click (a real comm message, as the front end sends it, possibly from another thread)
answers it; a click the card never offered, on a stale card or a second one is ignored;
without a front end the documented default answers, at once when the caller knows nobody
can click, else once the view has not said "rendered" within the headless wait. The ops
sent are the typed ones of view/ops.py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from pydantic import TypeAdapter
from view_support import HEADER, Recorder, click, record_comms

from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.jupyter.view.ask import Answer, Choice, ask
from mibyan_jupyter.jupyter.view.ops import ViewOp

CHOICES = [
    Choice("fork", "Fork and continue here", "A new session"),
    Choice("take_over", "Take it over"),
    Choice("cancel", "Cancel"),
]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


async def until(condition: Callable[[], object]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_a_click_answers_and_the_card_shows_it(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    task = asyncio.create_task(ask(view, "Session abc is in use.", CHOICES, default="fork"))
    await until(lambda: recorder.ops("ask"))
    (card,) = recorder.ops("ask")
    assert card["question"] == "Session abc is in use."
    assert card["default"] == "fork"
    assert card["choices"] == [
        {"value": "fork", "label": "Fork and continue here", "detail": "A new session"},
        {"value": "take_over", "label": "Take it over", "detail": ""},
        {"value": "cancel", "label": "Cancel", "detail": ""},
    ]
    click(view, {"type": "rendered", "next": 0})
    ident = card["id"]
    click(view, {"type": "answer", "ask_id": "ask-unknown", "choice": "fork"})  # stale card
    click(view, {"type": "answer", "ask_id": ident, "choice": "delete_everything"})  # not offered
    click(view, {"type": "answer", "ask_id": ident, "choice": 3})  # not even a string
    await asyncio.sleep(0.3)
    assert not task.done()
    click(view, {"type": "answer", "ask_id": ident, "choice": "take_over"})
    click(view, {"type": "answer", "ask_id": ident, "choice": "cancel"})  # a second click
    assert await asyncio.wait_for(task, 5) == Answer("take_over", "user")
    await asyncio.sleep(0.01)
    assert recorder.ops("answered") == [
        {
            "op": "answered",
            "id": ident,
            "choice": "take_over",
            "label": "Take it over",
            "by": "user",
        }
    ]
    adapter: TypeAdapter[ViewOp] = TypeAdapter(ViewOp)
    for op in recorder.ops():
        assert adapter.validate_python(op, strict=True) == op


async def test_a_click_from_another_thread(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    click(view, {"type": "rendered", "next": 0})
    task = asyncio.create_task(ask(view, "Go on?", CHOICES[:2], default="fork"))
    await until(lambda: recorder.ops("ask"))
    ident = recorder.ops("ask")[0]["id"]
    content = {"type": "answer", "ask_id": ident, "choice": "fork"}
    thread = threading.Thread(target=click, args=(view, content))
    thread.start()
    thread.join()
    assert await asyncio.wait_for(task, 5) == Answer("fork", "user")


async def test_without_a_front_end_the_default_answers(recorder: Recorder) -> None:
    """Nobody says "rendered" within the headless wait: the default, said on the card."""
    view = AgentView(HEADER)
    began = time.monotonic()
    answer = await ask(view, "Fork?", CHOICES, default="fork", headless_wait=0.3)
    assert answer == Answer("fork", "default")
    assert 0.3 <= time.monotonic() - began < 2.0
    await asyncio.sleep(0.01)  # the outbox sends when the loop next runs
    assert recorder.ops("answered") == [
        {
            "op": "answered",
            "id": recorder.ops("ask")[0]["id"],
            "choice": "fork",
            "label": "Fork and continue here",
            "by": "default",
        }
    ]


async def test_headless_answers_at_once_and_a_late_click_is_ignored(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    began = time.monotonic()
    answer = await ask(view, "Fork?", CHOICES, default="cancel", headless=True)
    assert answer == Answer("cancel", "default")
    assert time.monotonic() - began < 0.2
    await asyncio.sleep(0.01)
    ident = recorder.ops("ask")[0]["id"]
    click(view, {"type": "answer", "ask_id": ident, "choice": "fork"})
    assert [op["choice"] for op in recorder.ops("answered")] == ["cancel"]


async def test_kernel_interrupt_stops_the_wait(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    click(view, {"type": "rendered", "next": 0})
    task = asyncio.create_task(ask(view, "Fork?", CHOICES, default="fork"))
    await until(lambda: recorder.ops("ask"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_default_must_be_one_of_the_choices(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    with pytest.raises(ValueError, match="default"):
        await ask(view, "?", CHOICES, default="maybe")
    with pytest.raises(ValueError, match="distinct"):
        await ask(view, "?", [Choice("a", "A"), Choice("a", "B")], default="a")
    assert recorder.ops("ask") == []
