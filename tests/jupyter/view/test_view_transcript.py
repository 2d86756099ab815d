"""The live view's end: finish() puts the static transcript (rendered by the export layer)
in the live view's place through the same display id, and what the view sends on the way is
inert and free of secrets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from transcript_support import CORPUS, KEY, PNG, assert_inert, conversation
from view_support import HEADER, Recorder, record_comms, reply_events

from mibyan_jupyter.core.events import MessageEnd, ToolExecutionEnd
from mibyan_jupyter.core.messages import AssistantMessage, ToolMessage, UserMessage
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript
from mibyan_jupyter.jupyter.view import AgentView

SESSION = SessionMeta(id=HEADER.session_id, title=HEADER.title, model=HEADER.model)


def test_the_live_view_sends_only_inert_html(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = record_comms(monkeypatch)
    view = AgentView(HEADER)
    view(MessageEnd(message=UserMessage(content=CORPUS)))  # the prompt, as the agent takes it
    for event in reply_events([CORPUS[i : i + 7] for i in range(0, len(CORPUS), 7)]):
        view(event)
    result = conversation(CORPUS)[2]
    assert isinstance(result, ToolMessage)
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=result, is_error=False))
    finals = recorder.ops("final")
    assert len(finals) == 1
    assert_inert(finals[0]["html"])
    assert "<img" not in finals[0]["html"]
    assert recorder.ops("result")[0]["images"] == [f"data:image/png;base64,{PNG}"]
    # Text ops carry the payload verbatim: the front end sets them with textContent.
    assert recorder.streamed("text", "a1") == CORPUS


@pytest.fixture
def display_pub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict]]:
    """An IPython shell whose displays are captured instead of published."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    created = not InteractiveShell.initialized()
    shell = InteractiveShell.instance()
    publisher = CapturingDisplayPublisher()
    monkeypatch.setattr(shell, "display_pub", publisher)
    yield publisher.outputs
    if created:
        InteractiveShell.clear_instance()


def test_finish_replaces_the_live_view_by_the_transcript(
    monkeypatch: pytest.MonkeyPatch, display_pub: list[dict]
) -> None:
    monkeypatch.setenv("MIBYAN_FINISH_TEST_API_KEY", KEY)
    recorder: Recorder = record_comms(monkeypatch)
    view = AgentView(HEADER)
    view.display()
    view(MessageEnd(message=UserMessage(content=f"Plot **x** {KEY}")))
    live = display_pub[0]
    assert "application/vnd.jupyter.widget-view+json" in live["data"]
    display_id = live["transient"]["display_id"]
    messages = conversation(CORPUS + KEY)
    for event in reply_events(["I'll plot it."]):
        view(event)
    view.finish(messages, status="stopped")
    view.finish(messages, status="completed")  # idempotent: nothing more is displayed
    assert len(display_pub) == 2
    final = display_pub[1]
    assert final["update"] is True
    assert final["transient"] == {"display_id": display_id}
    assert set(final["data"]) == {"text/html", "text/markdown", "text/plain"}
    assert final["data"] == render_transcript(
        messages, session=SESSION, demo=HEADER.demo, status="stopped"
    )
    assert_inert(final["data"]["text/html"])
    assert 'data-status="stopped"' in final["data"]["text/html"]
    assert recorder.sent[-1].msg_type == "comm_close"
    for value in final["data"].values():
        assert KEY not in value
    assert KEY not in recorder.everything()


def test_finish_without_display_shows_the_transcript(
    monkeypatch: pytest.MonkeyPatch, display_pub: list[dict]
) -> None:
    record_comms(monkeypatch)
    view = AgentView(HEADER)
    view.finish([UserMessage(content="hi"), AssistantMessage(content="hello")], status="completed")
    assert len(display_pub) == 1
    assert display_pub[0]["update"] is False
    assert "hello" in display_pub[0]["data"]["text/html"]
