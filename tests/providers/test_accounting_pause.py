"""Anthropic ``pause_turn``: the turn goes on (issue 10, item 9).

A reply that stops with ``pause_turn`` (a long server-tool loop) must be sent back as-is, in
a follow-up request that ends with its content blocks, server tool blocks included; the
model then continues its turn. The loop sees one reply: the text of both parts, the tool
calls numbered on, the usage of both requests. Over real loopback HTTP, with the streams
scripted event by event as the API sends them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import Agent, AssistantMessage, RetryNotice, ToolMessage, tool
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.anthropic import MAX_CONTINUATIONS
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, Fault, fake_model
from mibyan_jupyter.testing.wire import RawReply

Json = dict[str, Any]
SEARCH_ID = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"
RESULT: Json = {
    "type": "web_search_tool_result",
    "tool_use_id": SEARCH_ID,
    "content": [
        {
            "type": "web_search_result",
            "title": "Exchange rates",
            "url": "https://example.com/rates",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2I",
            "page_age": "April 30, 2025",
        }
    ],
}


def start(input_tokens: int) -> Json:
    message = {"id": "msg_01", "type": "message", "role": "assistant", "model": "main-model"}
    message |= {"content": [], "stop_reason": None, "stop_sequence": None}
    message["usage"] = {"input_tokens": input_tokens, "output_tokens": 1}
    return {"type": "message_start", "message": message}


def text(index: int, *pieces: str) -> list[Json]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            }
            for p in pieces
        ),
        {"type": "content_block_stop", "index": index},
    ]


def block(index: int, first: Json, *json_pieces: str) -> list[Json]:
    return [
        {"type": "content_block_start", "index": index, "content_block": first},
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in json_pieces
        ),
        {"type": "content_block_stop", "index": index},
    ]


def end(stop: str, output_tokens: int) -> list[Json]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    return [delta | {"usage": {"output_tokens": output_tokens}}, {"type": "message_stop"}]


SEARCH = {"type": "server_tool_use", "id": SEARCH_ID, "name": "web_search", "input": {}}
PAUSED = RawReply(
    [
        start(100),
        *text(0, "Let me ", "search."),
        *block(1, SEARCH, "", '{"query": ', '"usd eur"}'),
        {"type": "content_block_start", "index": 2, "content_block": RESULT},
        {"type": "content_block_stop", "index": 2},
        *end("pause_turn", 40),
    ]
)
SENT_BACK = [
    {"type": "text", "text": "Let me search."},
    SEARCH | {"input": {"query": "usd eur"}},
    RESULT,
]


@tool
def convert(amount: float) -> str:
    """Convert an amount."""
    return f"{amount * 0.9:.2f} EUR"


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
        return signal.aborted

    made = ProviderClient(retry=RetryPolicy(sleep=no_sleep))
    made.register("main", fake_model(fake_provider, "main-model", api_mode="anthropic_messages"))
    yield made
    await made.aclose()


async def test_a_paused_turn_continues_with_its_blocks_sent_back_as_is(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    fake_provider.push(
        PAUSED, RawReply([start(300), *text(0, "The rate is ", "0.9."), *end("end_turn", 12)])
    )
    recorder = Recorder()
    agent = Agent(stream_fn=client, model="main")
    agent.subscribe(recorder)
    assert await agent.achat("usd to eur?") == "Let me search.\n\nThe rate is 0.9."
    first, second = (r.body for r in fake_provider.requests)
    assert first is not None
    assert second is not None
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1] == {"role": "assistant", "content": SENT_BACK}
    [reply] = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    assert reply.stop_reason == "stop"
    assert (reply.usage.input, reply.usage.output) == (100 + 300, 40 + 12)
    assert not recorder.of(RetryNotice)
    check_grammar(recorder.events)


async def test_a_continuation_may_call_tools_numbered_after_the_paused_part(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    call = {"type": "tool_use", "id": "toolu_01", "name": "convert", "input": {}}
    fake_provider.push(
        PAUSED,
        RawReply([start(300), *block(0, call, '{"amount": ', "10}"), *end("tool_use", 9)]),
        FakeReply("10 USD is 9.00 EUR."),
    )
    agent = Agent(stream_fn=client, model="main", tools=[convert])
    assert await agent.achat("convert 10 usd") == "10 USD is 9.00 EUR."
    reply = next(m for m in agent.state.messages if isinstance(m, AssistantMessage))
    assert reply.stop_reason == "tool_use"
    assert [c.function.name for c in reply.tool_calls] == ["convert"]
    result = next(m for m in agent.state.messages if isinstance(m, ToolMessage))
    assert result.content == "9.00 EUR"
    third = fake_provider.requests[2].body
    assert third is not None
    # the next turn sends the whole reply: its text, then the client tool call
    assistant = third["messages"][1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]


async def test_a_failed_continuation_starts_the_reply_over(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    """A retry means the reply starts over: the original request, not the follow-up."""
    fake_provider.push(PAUSED, Fault("status", status=529), FakeReply("Fresh answer."))
    recorder = Recorder()
    agent = Agent(stream_fn=client, model="main")
    agent.subscribe(recorder)
    assert await agent.achat("usd to eur?") == "Fresh answer."
    bodies = [r.body for r in fake_provider.requests]
    assert bodies[0] is not None
    assert bodies[1] is not None
    assert bodies[2] is not None
    assert bodies[1]["messages"][-1]["role"] == "assistant"
    assert bodies[2]["messages"] == bodies[0]["messages"]
    assert [n.error_kind for n in recorder.of(RetryNotice)] == ["overloaded"]


async def test_pauses_are_continued_a_bounded_number_of_times(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    paused_again = RawReply([start(10), *text(0, "."), *end("pause_turn", 1)])
    fake_provider.push(PAUSED, *[paused_again] * MAX_CONTINUATIONS)
    agent = Agent(stream_fn=client, model="main")
    answer = await agent.achat("search forever")
    assert answer.startswith("Let me search.")
    assert len(fake_provider.requests) == 1 + MAX_CONTINUATIONS
    assert fake_provider.pending == 0


async def test_a_paused_reply_is_kept_when_no_call_is_left_to_continue_it(
    fake_provider: FakeProviderServer,
) -> None:
    made = ProviderClient(max_calls=1)
    made.register("main", fake_model(fake_provider, "main-model", api_mode="anthropic_messages"))
    fake_provider.push(PAUSED, FakeReply("never sent"))
    agent = Agent(stream_fn=made, model="main")
    try:
        assert await agent.achat("usd to eur?") == "Let me search."
    finally:
        await made.aclose()
    [reply] = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    assert reply.stop_reason == "stop"
    assert reply.usage.input == 100
    assert fake_provider.pending == 1
