"""Streaming costs the same per delta at any length, and streamed text is always valid.

The partial message of a ``MessageUpdate`` and the parsed arguments of a ``ToolCallDelta``
are built only when read (and then as they were at that delta); a no-op subscriber makes
the loop build neither. A surrogate pair split across two deltas (over real HTTP from the
fake server, in every wire API) arrives as one character, a lone surrogate as U+FFFD, and
the session goes on and is stored as valid UTF-8. No timing here: bench/stream_core.py
measures the cost.
"""

from __future__ import annotations

import copy
import json
import pickle
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    AGENT_EVENT_ADAPTER,
    Agent,
    AgentEvent,
    AssistantMessage,
    MessageUpdate,
    ScriptedModel,
    tool,
)
from mibyan_jupyter.core._run import model_call
from mibyan_jupyter.core._run.partial import PartialMessage
from mibyan_jupyter.core.fakes import Call, Reply
from mibyan_jupyter.core.safe_text import REPLACEMENT, is_clean
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import (
    ModelRequest,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextStart,
    ThinkingDelta,
    ToolCallDelta,
)
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent, resume
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model

HIGH, LOW = "\ud83d", "\ude00"  # the two halves of U+1F600 (😀)
MODES = ("chat_completions", "codex_responses", "anthropic_messages")


@tool(side_effects=False)
def echo(s: str) -> str:
    """Return ``s``."""
    return s


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the loop built a partial message and parsed partial arguments."""
    seen = {"snapshots": 0, "parses": 0}
    snapshot, parse = PartialMessage.snapshot, model_call.parse_partial

    def counted_snapshot(self: PartialMessage, *args: Any, **kwargs: Any) -> AssistantMessage:
        seen["snapshots"] += 1
        return snapshot(self, *args, **kwargs)

    def counted_parse(text: str) -> Any:
        seen["parses"] += 1
        return parse(text)

    monkeypatch.setattr(PartialMessage, "snapshot", counted_snapshot)
    monkeypatch.setattr(model_call, "parse_partial", counted_parse)
    return seen


def _long_reply() -> Reply:
    code = "x = 1\n" * 300
    return Reply("word " * 400, thinking="hmm " * 200, calls=[Call("echo", {"s": code})])


async def test_a_subscriber_that_reads_only_deltas_costs_no_snapshot(
    counts: dict[str, int],
) -> None:
    model = ScriptedModel([_long_reply(), "done"], chunk_size=1)
    agent = Agent(stream_fn=model, tools=[echo])
    deltas: list[str] = []
    agent.subscribe(
        lambda e: (
            deltas.append(e.event.delta)
            if isinstance(e, MessageUpdate) and isinstance(e.event, TextDelta)
            else None
        )
    )
    assert await agent.achat("go") == "done"
    assert "".join(deltas) == "word " * 400 + "done"
    # ~6,000 deltas: one snapshot for each MessageStart, none per delta, no parse at all
    assert counts["snapshots"] <= 2
    assert counts["parses"] == 0


async def test_a_partial_read_later_is_the_message_as_it_was_then(
    counts: dict[str, int],
) -> None:
    text = "abcdefghijklmnopqrstuvwxyz" * 4
    model = ScriptedModel([Reply(text, calls=[Call("echo", {"s": "ok"})]), "done"], chunk_size=1)
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    live: list[str | None] = []

    def reader(event: AgentEvent) -> None:
        if len(live) == len(text):  # the first reply only
            return
        if isinstance(event, MessageUpdate) and isinstance(event.event, TextDelta):
            if len(live) % 10 == 0:  # reads some, at its own pace
                streaming = agent.state.streaming_message
                live.append(streaming.content if streaming else None)
            else:
                live.append("")

    agent.subscribe(recorder)
    agent.subscribe(reader)
    await agent.achat("go")
    check_grammar(recorder.events)
    assert agent.state.streaming_message is None
    read_live = [value for value in live if value]
    assert read_live == [text[: i + 1] for i in range(0, len(text), 10)]
    before = counts["snapshots"]
    updates = [e for e in recorder.of(MessageUpdate) if isinstance(e.event, TextDelta)]
    updates = updates[: len(text)]
    for i in reversed(range(len(updates))):  # after the run, in any order
        assert updates[i].message.content == text[: i + 1]
    assert counts["snapshots"] - before == len(updates) - len(read_live)  # each built once
    assert updates[-1].message.content == text  # cached: no new build
    assert counts["snapshots"] - before == len(updates) - len(read_live)


async def test_deferred_arguments_are_parsed_once_when_read(counts: dict[str, int]) -> None:
    model = ScriptedModel([Reply(calls=[Call("echo", {"s": "hello"})]), "done"], chunk_size=2)
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.achat("go")
    deltas = [e.event for e in recorder.of(MessageUpdate) if isinstance(e.event, ToolCallDelta)]
    assert counts["parses"] == 0
    assert deltas[-1].arguments == {"s": "hello"}
    assert deltas[-1].arguments == {"s": "hello"}
    assert counts["parses"] == 1
    # '{"' '{"s"' '{"s": ' '{"s": "h' ...
    assert [d.arguments for d in deltas][:4] == [{}, {}, {}, {"s": "h"}]


async def test_deferred_events_behave_like_built_ones() -> None:
    model = ScriptedModel([Reply("hi there", calls=[Call("echo", {"s": "x"})]), "done"])
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.achat("go")
    updates = recorder.of(MessageUpdate)
    copies = [update.model_copy() for update in updates]  # made before anything was built
    for update, copied in zip(updates, copies, strict=True):
        built = MessageUpdate(message=update.message, event=update.event)
        assert update == built
        assert copied == built
        assert AGENT_EVENT_ADAPTER.validate_json(AGENT_EVENT_ADAPTER.dump_json(update)) == built
        assert pickle.loads(pickle.dumps(update)) == built
        assert copy.deepcopy(update) == built
        assert repr(update) == repr(built)


async def test_split_and_lone_surrogates_are_cleaned_in_the_loop() -> None:
    reply = Reply(
        f"a{HIGH}{LOW}b{LOW}{HIGH}",  # a lone high half last: held back, then released
        thinking=f"t{HIGH}{LOW}",
        calls=[Call("echo", f'{{"s": "{HIGH}{LOW}"}}')],
    )
    model = ScriptedModel([reply, "done"], chunk_size=2)
    agent = Agent(stream_fn=model, tools=[echo])
    recorder = Recorder()
    agent.subscribe(recorder)
    assert await agent.achat("go") == "done"
    _assert_clean_stream(recorder)
    assistant = agent.state.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == f"a😀b{REPLACEMENT}{REPLACEMENT}"
    assert _first_text(recorder) == assistant.content  # what streamed is what was kept
    assert assistant.thinking[0].text == "t😀"
    assert json.loads(assistant.tool_calls[0].function.arguments) == {"s": "😀"}
    assert agent.state.messages[2].content == "😀"


async def test_a_held_half_is_released_when_the_stream_breaks_off() -> None:
    """A stream that ends without its final message (a broken stream function): the
    partial message becomes the final one, the held high half as U+FFFD."""

    async def broken(request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        yield StreamStart(model="m")
        yield TextStart()
        yield TextDelta(delta=f"ok{HIGH}")

    agent = Agent(stream_fn=broken)
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    _assert_clean_stream(recorder)
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "error"
    assert final.content == f"ok{REPLACEMENT}"
    assert _first_text(recorder) == "ok"  # the held half never went out as a delta


def _first_text(recorder: Recorder) -> str:
    """The text deltas of the first assistant message, joined."""
    parts: list[str] = []
    for event in recorder.events:
        if isinstance(event, MessageUpdate) and isinstance(event.event, TextDelta):
            parts.append(event.event.delta)
        elif parts and event.type == "message_end":
            break
    return "".join(parts)


def _assert_clean_stream(recorder: Recorder) -> None:
    """Every delta, every partial and final message a subscriber saw is valid UTF-8."""
    check_grammar(recorder.events)
    kinds = TextDelta | ThinkingDelta | ToolCallDelta
    deltas = [e.event for e in recorder.of(MessageUpdate) if isinstance(e.event, kinds)]
    assert deltas
    assert all(is_clean(d.delta) for d in deltas)
    assert all(
        is_clean(AGENT_EVENT_ADAPTER.dump_json(e).decode())
        for e in recorder.events  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_pair_split_across_sse_deltas_keeps_the_session_alive(
    fake_provider: FakeProviderServer, mode: str, tmp_path: Path
) -> None:
    """The fake server sends ``"\\ud83d"`` at the end of one delta and ``"\\ude00"`` at
    the start of the next (and a lone ``"\\udc00"``): the reply is whole, the next prompt
    of the session works, and the stored session reads back as valid UTF-8."""
    fake_provider.push(
        FakeReply(
            f"a{HIGH}{LOW}b{LOW}",
            thinking=f"t{HIGH}{LOW}",
            calls=[FakeCall("echo", f'{{"s": "{HIGH}{LOW}"}}')],
            chunk_size=2,
        ),
        FakeReply("done"),
        FakeReply("again"),
    )
    db = tmp_path / "sessions.sqlite3"
    store = SessionStore(db)
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, api_mode=mode))
    try:
        agent, info = recorded_agent(store, stream_fn=client, model="main", tools=[echo])
        recorder = Recorder()
        agent.subscribe(recorder)
        assert await agent.achat("go") == "done"
        _assert_clean_stream(recorder)
        assert _first_text(recorder) == f"a😀b{REPLACEMENT}"
        body = json.dumps(fake_provider.requests[1].body, ensure_ascii=False)
        assert "a😀b" in body  # the next request carries the reply whole
        assert await agent.achat("and again") == "again"  # the next prompt of the session
    finally:
        await client.aclose()
    store.close()
    _assert_stored_utf8(db)
    store = SessionStore(db)
    resumed, same = resume(store, info.id, stream_fn=client)
    assert same.id == info.id
    assistant = resumed.state.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == f"a😀b{REPLACEMENT}"
    assert resumed.state.messages[2].content == "😀"
    store.close()


def _assert_stored_utf8(db: Path) -> None:
    """Every text value in every table of the file is valid UTF-8 as stored (read as
    bytes, so nothing on the way out could hide a bad one)."""
    connection = sqlite3.connect(db)
    connection.text_factory = bytes
    checked = 0
    try:
        tables = [
            row[0].decode()
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        for table in tables:
            columns = [
                row[1].decode() for row in connection.execute(f'PRAGMA table_info("{table}")')
            ]
            for column in columns:
                query = f'SELECT "{column}" FROM "{table}" WHERE typeof("{column}") = \'text\''
                for (value,) in connection.execute(query):
                    assert is_clean(value.decode("utf-8")), (table, column, value[:80])
                    checked += 1
    finally:
        connection.close()
    assert checked > 0
