"""finish() after a run that compacted: the static bundle the cell keeps (and the saved
notebook) holds the compaction receipt and the notes the live view showed, where they
happened (issue 10, items 2 and 3; docs/architecture.md, "Context compression"). The run is
real: an Agent over loopback HTTP to the fake provider, which enforces its own window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from transcript_support import assert_inert
from view_support import HEADER, Recorder, record_comms

from mibyan_jupyter.core import Agent
from mibyan_jupyter.core.compaction import CompactionSettings
from mibyan_jupyter.core.messages import AssistantMessage, Message, UserMessage
from mibyan_jupyter.core.notes import NoteContext
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model

WORDS = "word " * 400
WINDOW = 8_000
SUMMARY = "Goals: plot sales.\n\n<img src=x onerror=alert(1)><script>alert(1)</script>"


@pytest.fixture
def display_pub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    created = not InteractiveShell.initialized()
    shell = InteractiveShell.instance()
    publisher = CapturingDisplayPublisher()  # type: ignore[no-untyped-call]
    monkeypatch.setattr(shell, "display_pub", publisher)
    yield publisher.outputs
    if created:
        InteractiveShell.clear_instance()


def history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [UserMessage(content=f"q{i} {WORDS}"), AssistantMessage(content=f"a{i} {WORDS}")]
    return out


def budget_note(context: NoteContext) -> list[str]:
    return ["[budget] 70 % of turns used (7 of 10)"]


async def test_finish_keeps_the_receipt_and_the_note(
    monkeypatch: pytest.MonkeyPatch, display_pub: list[dict[str, Any]]
) -> None:
    recorder: Recorder = record_comms(monkeypatch)
    with FakeProviderServer(
        FakeReply(SUMMARY), FakeReply("Here is the **plot**."), context_window=WINDOW
    ) as server:
        client = ProviderClient()
        client.register("main", fake_model(server, api_mode="chat_completions"))
        agent = Agent(
            stream_fn=client,
            model="main",
            messages=history(6),
            compaction=CompactionSettings(window=WINDOW, keep_last=4),
            notes=budget_note,
        )
        view = AgentView(HEADER)
        view.display()
        agent.subscribe(view)
        try:
            assert await agent.achat("plot the sales") == "Here is the **plot**."
        finally:
            await client.aclose()
        assert server.overflows == []  # the compacted request fit the server's own window
    kinds = [op["kind"] for op in recorder.ops("notice")]
    assert "compaction" in kinds  # the live view showed both
    assert "notes" in kinds
    view.finish(agent.state.messages, status="completed")

    final = display_pub[-1]
    assert final["update"] is True
    page = final["data"]["text/html"]
    assert page.startswith('<div class="mibyan-transcript"')
    assert_inert(page)
    assert "<img" not in page
    assert 'data-kind="compaction"' in page
    assert "Compacted the conversation (the conversation neared the context window)" in page
    assert '<details class="mibyan-summary"><summary>Summary</summary>' in page
    assert "Goals: plot sales." in page
    assert "Sent with the request: [budget] 70 % of turns used (7 of 10)" in page
    # In place: after the prompt (kept word for word), before the reply it preceded.
    assert page.index("plot the sales") < page.index('data-kind="compaction"')
    assert page.index('data-kind="compaction"') < page.index('data-kind="notes"')
    assert page.index('data-kind="notes"') < page.index("<strong>plot</strong>")
    assert "[budget]" not in "".join(
        str(m.content) for m in agent.state.messages if isinstance(m, UserMessage)
    )  # a note is never a message
    plain = final["data"]["text/plain"]
    assert "Notice: Compacted the conversation" in plain
    assert "Notice: Sent with the request: [budget]" in plain
    assert "Compacted the conversation" in final["data"]["text/markdown"]
