"""The Anthropic adapter never asks for more than the request's ``max_tokens`` (issue 11,
"Honest budgets"): the budget gate reserves a call's worst case with the ``max_tokens`` it
clamps, so extended thinking must fit under it, not raise it, and the continuations of a
paused turn (``pause_turn``) must share it. Over real loopback HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from test_accounting_pause import PAUSED, end, start, text

from mibyan_jupyter.core import Agent
from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.stream import ThinkingLevel
from mibyan_jupyter.providers.anthropic import (
    MIN_CONTINUATION_TOKENS,
    MIN_THINKING_BUDGET,
    THINKING_BUDGETS,
)
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model
from mibyan_jupyter.testing.wire import RawReply


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    made = ProviderClient()
    made.register("main", fake_model(fake_provider, "main-model", api_mode="anthropic_messages"))
    yield made
    await made.aclose()


@pytest.mark.parametrize("level", list(THINKING_BUDGETS))
@pytest.mark.parametrize("cap", [1_500, 3_000, 9_000, 40_000])
async def test_thinking_never_raises_max_tokens_over_the_gates_clamp(
    fake_provider: FakeProviderServer,
    client: ProviderClient,
    level: ThinkingLevel,
    cap: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An output cap makes the gate name ``max_tokens``; the body keeps it, with the
    thinking budget cut to fit (or no thinking, said in the log, below the minimum)."""
    fake_provider.push(FakeReply("Done."))
    agent = Agent(
        stream_fn=client,
        model="main",
        thinking_level=level,
        budget=BudgetLimits(max_turns=None, max_output_tokens=cap),
    )
    with caplog.at_level(logging.INFO, "mibyan_jupyter.providers.anthropic"):
        assert await agent.achat("hi") == "Done."
    [sent] = fake_provider.requests
    body = sent.body
    assert body is not None
    assert body["max_tokens"] <= cap
    thinking = body.get("thinking")
    if thinking is None:
        assert body["max_tokens"] < 2 * MIN_THINKING_BUDGET
        assert "not sent" in caplog.text
    else:
        budget = thinking["budget_tokens"]
        assert MIN_THINKING_BUDGET <= budget <= THINKING_BUDGETS[level]
        assert body["max_tokens"] - budget >= min(4096, body["max_tokens"] // 2)


async def test_without_a_named_max_tokens_thinking_still_gets_room(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    fake_provider.push(FakeReply("Done."))
    agent = Agent(stream_fn=client, model="main", thinking_level="xhigh")
    assert await agent.achat("hi") == "Done."
    body = fake_provider.requests[0].body
    assert body is not None
    assert body["thinking"]["budget_tokens"] == THINKING_BUDGETS["xhigh"]
    assert body["max_tokens"] == THINKING_BUDGETS["xhigh"] + 4096


def paused(output_tokens: int) -> RawReply:
    return RawReply([start(10), *text(0, "."), *end("pause_turn", output_tokens)])


async def test_continuations_share_the_requests_max_tokens(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    """Each follow-up is sent what the earlier parts left; once less than a
    continuation's worth is left the paused reply is kept as it is."""
    fake_provider.push(paused(400), paused(300), paused(100), FakeReply("never sent"))
    agent = Agent(stream_fn=client, model="main", loop_options={"max_tokens": 1_000})
    answer = await agent.achat("search")
    bodies = [r.body for r in fake_provider.requests]
    assert [b["max_tokens"] for b in bodies if b is not None] == [1_000, 600, 300]
    assert MIN_CONTINUATION_TOKENS > 1_000 - (400 + 300 + 100)
    assert fake_provider.pending == 1
    assert answer.startswith(".")
    reply = agent.state.messages[-1]
    assert reply.usage is not None
    assert reply.usage.output == 800 <= 1_000


async def test_a_budgeted_run_pauses_within_one_reservation(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    """Under an output cap, every follow-up of the paused turn is sent the gate's clamp
    less what the earlier parts produced (so a provider that honours ``max_tokens`` keeps
    the turn's output inside the one reservation), and the follow-ups stop when it is used
    up: before, each of 8 continuations could have spent the whole clamp."""
    outputs = [1_000, 1_000, 1_000, 700]  # each within what its request was allowed
    fake_provider.push(PAUSED, *map(paused, outputs), *[paused(10)] * 4)
    agent = Agent(
        stream_fn=client, model="main", budget=BudgetLimits(max_turns=None, max_output_tokens=5_000)
    )
    await agent.achat("search forever")
    bodies = [r.body for r in fake_provider.requests]
    turn = [b for b in bodies if b is not None and b["messages"][-1]["role"] == "assistant"]
    clamp = bodies[0]["max_tokens"] if bodies[0] is not None else 0
    assert clamp <= 5_000
    produced = [40, *outputs]
    assert len(turn) == len(outputs)  # then too little was left to continue
    for k, body in enumerate(turn, start=1):
        assert body["max_tokens"] == clamp - sum(produced[:k])
    assert clamp - sum(produced) < MIN_CONTINUATION_TOKENS
    assert sum(produced) <= clamp
