"""A Responses stream of raw reasoning gives one thinking block per reasoning item
(issue 10, item 9), however the server frames the items.

Each item's ``encrypted_content`` must go back with that item's text, so merging two items
into one block would send the model a reasoning item it never produced. Over real loopback
HTTP, with the streams scripted event by event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mibyan_jupyter.core import Agent, AssistantMessage, Thinking
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model
from mibyan_jupyter.testing.wire import RawReply, response_object

Json = dict[str, Any]
THOUGHTS = {"rs_1": "First I look at the units.", "rs_2": "Then I convert them."}


def item(item_id: str, *, done: bool) -> Json:
    """A raw reasoning item (gpt-oss style: ``content`` of ``reasoning_text``)."""
    content = [{"type": "reasoning_text", "text": THOUGHTS[item_id]}] if done else []
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": content,
        "encrypted_content": f"enc-{item_id}" if done else None,
    }


def deltas(item_id: str, position: int) -> list[Json]:
    text = THOUGHTS[item_id]
    ref = {"item_id": item_id, "output_index": position, "content_index": 0}
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    return [
        *({"type": "response.reasoning_text.delta", **ref, "delta": p} for p in pieces),
        {"type": "response.reasoning_text.done", **ref, "text": text},
    ]


def added(item_id: str, position: int) -> Json:
    return {
        "type": "response.output_item.added",
        "output_index": position,
        "item": item(item_id, done=False),
    }


def done(item_id: str, position: int) -> Json:
    return {
        "type": "response.output_item.done",
        "output_index": position,
        "item": item(item_id, done=True),
    }


def answer(position: int) -> list[Json]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed"}
    message["content"] = [{"type": "output_text", "text": "12 inches.", "annotations": []}]
    final = response_object(model="main-model", n=1, body={}, status="completed", output=[])
    final["usage"] = {"input_tokens": 20, "output_tokens": 30, "total_tokens": 50}
    return [
        {"type": "response.output_item.done", "output_index": position, "item": message},
        {"type": "response.completed", "response": final},
    ]


FRAMED = [
    added("rs_1", 0),
    *deltas("rs_1", 0),
    done("rs_1", 0),
    added("rs_2", 1),
    *deltas("rs_2", 1),
    done("rs_2", 1),
    *answer(2),
]
"""OpenAI's framing: each item between its ``output_item.added`` and ``.done``."""
DELTAS_ONLY = [*deltas("rs_1", 0), *deltas("rs_2", 1), done("rs_1", 0), done("rs_2", 1), *answer(2)]
"""A compatible server that names the item in each delta and sends the items at the end."""
DONE_ONLY = [done("rs_1", 0), done("rs_2", 1), *answer(2)]
"""A server that streams no reasoning deltas, only the finished items."""


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
        return signal.aborted

    made = ProviderClient(retry=RetryPolicy(sleep=no_sleep))
    made.register("main", fake_model(fake_provider, "main-model", api_mode="codex_responses"))
    yield made
    await made.aclose()


@pytest.mark.parametrize(
    "events", [FRAMED, DELTAS_ONLY, DONE_ONLY], ids=["framed", "deltas", "done"]
)
async def test_one_thinking_block_per_reasoning_item(
    fake_provider: FakeProviderServer, client: ProviderClient, events: list[Json]
) -> None:
    fake_provider.push(RawReply(events), FakeReply("ok"))
    agent = Agent(stream_fn=client, model="main", thinking_level="low")
    assert await agent.achat("a foot in inches?") == "12 inches."
    reply = next(m for m in agent.state.messages if isinstance(m, AssistantMessage))
    assert reply.thinking == (
        Thinking(text=THOUGHTS["rs_1"], signature="rs_1", encrypted="enc-rs_1"),
        Thinking(text=THOUGHTS["rs_2"], signature="rs_2", encrypted="enc-rs_2"),
    )
    await agent.achat("and a yard?")
    body = fake_provider.requests[1].body
    assert body is not None
    sent = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert [(i["encrypted_content"], i["summary"][0]["text"]) for i in sent] == [
        ("enc-rs_1", THOUGHTS["rs_1"]),
        ("enc-rs_2", THOUGHTS["rs_2"]),
    ]
