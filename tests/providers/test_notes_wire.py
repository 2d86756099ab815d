"""Ephemeral notes on the wire (issue 10, item 2): each adapter puts ``ModelRequest.notes``
after the transcript, never in the system block, so the system block and the whole prefix
before the notes are the same bytes from one request to the next (the provider's prompt
cache keeps hitting), and a later request without notes carries none.

The last test drives an ``Agent`` with a notes function end to end. Every case goes over real loopback HTTP (the fake server records the raw bodies) in all
three wire APIs, with a transcript that ends in tool results and one that ends in a user
message.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from mibyan_jupyter.core import Agent, tool
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.notes import NoteContext
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, ToolSpec
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.notes import NOTES_HEADER
from mibyan_jupyter.testing import (
    FakeCall,
    FakeProviderServer,
    FakeReply,
    RecordedRequest,
    fake_model,
)

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
SYSTEM = "You are a careful notebook assistant. Pinned: never delete files."
TOOL = ToolSpec("run_code", "Run Python in the kernel.", {"type": "object", "properties": {}})


def transcript(ending: str) -> list[Message]:
    call = ToolCall(id="call_1", function=FunctionCall(name="run_code", arguments='{"c": 1}'))
    messages: list[Message] = [
        UserMessage(content="Load the data and plot it."),
        AssistantMessage(content="Loading.", tool_calls=(call,), api="chat_completions"),
        ToolMessage(tool_call_id="call_1", name="run_code", content="df: 100 rows"),
    ]
    if ending == "user":
        messages += [AssistantMessage(content="Done."), UserMessage(content="Now the mean.")]
    return messages


async def send(
    server: FakeProviderServer, mode: str, messages: list[Message], notes: tuple[str, ...]
) -> RecordedRequest:
    """One request through the real client; the body the server received (Anthropic with
    prompt caching on, as for the real API)."""
    server.push(FakeReply("ok"))
    client = ProviderClient()
    spec = fake_model(server, api_mode=mode)
    if mode == "anthropic_messages":
        spec = dataclasses.replace(spec, prompt_caching=True)
    try:
        client.register("main", spec)
        request = ModelRequest(
            model="main", system_prompt=SYSTEM, messages=messages, tools=[TOOL], notes=notes
        )
        events = [event async for event in client(request, AbortSignal())]
    finally:
        await client.aclose()
    assert isinstance(events[-1], StreamDone)
    return server.requests[-1]


def system_block(mode: str, body: dict[str, Any]) -> str:
    if mode == "chat_completions":
        return json.dumps(body["messages"][0])
    if mode == "codex_responses":
        return json.dumps(body["instructions"])
    return json.dumps(body["system"])


def turns(mode: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["input"] if mode == "codex_responses" else body["messages"])


def without_notes(mode: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its notes taken out again, as the adapter would have sent it without."""
    body = json.loads(json.dumps(body))
    items = turns(mode, body)
    last = items[-1]
    content = last["content"]
    if isinstance(content, str):
        kept, _, _ = content.partition(NOTES_HEADER)
        last["content"] = kept.removesuffix("\n\n")
        if not last["content"]:
            items.pop()
    else:
        content[:] = [part for part in content if NOTES_HEADER not in part.get("text", "")]
        if not content:
            items.pop()
    body["input" if mode == "codex_responses" else "messages"] = items
    return body


def first_difference(a: bytes, b: bytes) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("ending", ["tool", "user"])
@pytest.mark.parametrize("mode", MODES)
async def test_notes_follow_the_transcript_and_leave_the_prefix_byte_identical(
    fake_provider: FakeProviderServer, mode: str, ending: str
) -> None:
    messages = transcript(ending)
    before = [m.model_dump_json() for m in messages]
    first = await send(fake_provider, mode, messages, ("Budget: 70 % of the turns used.",))
    second = await send(fake_provider, mode, messages, ("Variables: df DataFrame (100, 3)",))
    later = await send(fake_provider, mode, messages, ())
    assert first.body is not None
    assert second.body is not None
    assert later.body is not None

    # The system block is the same bytes in all three, and holds no note.
    assert system_block(mode, first.body) == system_block(mode, second.body)
    assert system_block(mode, first.body) == system_block(mode, later.body)
    assert NOTES_HEADER not in system_block(mode, first.body)

    # Two requests whose notes differ agree byte for byte up to the notes' own text.
    header_at = first.raw.index(NOTES_HEADER.encode())
    assert second.raw.index(NOTES_HEADER.encode()) == header_at
    assert first_difference(first.raw, second.raw) > header_at + len(NOTES_HEADER)

    # The notes sit in the last (user) turn, after the transcript's tool results.
    last = turns(mode, first.body)[-1]
    assert last["role"] == "user"
    assert "Budget: 70 %" in json.dumps(last)
    if mode == "anthropic_messages" and ending == "tool":
        assert [block["type"] for block in last["content"]] == ["tool_result", "text"]

    # Taking the notes out gives exactly the body of the request without notes.
    assert without_notes(mode, first.body) == later.body
    assert NOTES_HEADER.encode() not in later.raw
    assert [m.model_dump_json() for m in messages] == before  # the transcript is untouched


async def test_anthropic_cache_breakpoints_stay_on_the_system_block_and_the_transcript(
    fake_provider: FakeProviderServer,
) -> None:
    """The notes block never carries ``cache_control``: the cached prefix is the
    transcript, so the next request (with other notes, or none) reads it back."""
    messages = transcript("tool")
    noted = await send(fake_provider, "anthropic_messages", messages, ("Context: 52 % full.",))
    plain = await send(fake_provider, "anthropic_messages", messages, ())
    assert noted.body is not None
    assert plain.body is not None
    assert noted.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    notes_block = noted.body["messages"][-1]["content"][-1]
    assert NOTES_HEADER in notes_block["text"]
    assert "cache_control" not in notes_block
    marked = noted.body["messages"][-1]["content"][-2]
    assert marked["type"] == "tool_result"
    assert "cache_control" in marked
    assert noted.body["messages"][-1]["content"][:-1] == plain.body["messages"][-1]["content"]


@pytest.mark.parametrize("mode", MODES)
async def test_empty_notes_send_nothing(fake_provider: FakeProviderServer, mode: str) -> None:
    messages = transcript("tool")
    blank = await send(fake_provider, mode, messages, ("", "   "))
    plain = await send(fake_provider, mode, messages, ())
    assert blank.body == plain.body


@tool(side_effects=False)
def run_code(c: int) -> str:
    """Run a snippet (a stand-in)."""
    return f"ran {c}"


@pytest.mark.parametrize("mode", MODES)
async def test_an_agents_notes_reach_one_request_and_never_the_transcript(
    fake_provider: FakeProviderServer, mode: str
) -> None:
    """Through the whole stack: the agent's notes function is asked before each call; its
    note of the first call is on that request only and is never stored."""
    asked: list[int] = []

    def notes(context: NoteContext) -> list[str]:
        asked.append(len(asked))
        return ["Variables: df DataFrame (100, 3)"] if len(asked) == 1 else []

    fake_provider.push(FakeReply(calls=[FakeCall("run_code", {"c": 1})]), FakeReply("done"))
    client = ProviderClient()
    client.register("main", fake_model(fake_provider, api_mode=mode))
    agent = Agent(
        stream_fn=client, model="main", system_prompt=SYSTEM, tools=[run_code], notes=notes
    )
    try:
        assert await agent.achat("Load the data.") == "done"
    finally:
        await client.aclose()
    first, second = fake_provider.requests
    assert first.body is not None
    assert second.body is not None
    assert len(asked) == 2
    assert b"df DataFrame (100, 3)" in first.raw
    assert NOTES_HEADER.encode() not in second.raw
    assert system_block(mode, first.body) == system_block(mode, second.body)
    stored = "".join(message.model_dump_json() for message in agent.state.messages)
    assert NOTES_HEADER not in stored
    assert "df DataFrame" not in stored
