"""Every attempt's usage is reported once, priced (issue 10, item 9).

A retried attempt that streamed and then failed, a reply with only reasoning that was asked
again, the last attempt on a model that then failed over: each was billed, so its usage
travels in the notice that announced it (or in the final error), and the kept reply names
the model that produced it. Over real loopback HTTP, in all three wire APIs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import reduce

import pytest

from mibyan_jupyter.core import (
    AgentEnd,
    BudgetUpdated,
    FallbackNotice,
    RetryNotice,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.budget import BudgetLimits, BudgetTracker
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, StreamError, StreamEvent
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.pricing import Price, PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import resolve_model
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, FakeUsage, Fault

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
KEY = "sk-accounting-test-key-0001"
PRICES = PriceTable({"main-model": Price(1.0, 2.0), "backup-model": Price(10.0, 20.0)})
"""USD per million tokens: a million input tokens of the main model cost $1."""


async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
    return signal.aborted


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    made = ProviderClient(retry=RetryPolicy(max_retries=2, sleep=no_sleep), prices=PRICES)
    yield made
    await made.aclose()


@pytest.fixture
async def fallback_client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    made = ProviderClient(
        retry=RetryPolicy(max_retries=2, sleep=no_sleep), prices=PRICES, fallback_models=["backup"]
    )
    yield made
    await made.aclose()


def register(client: ProviderClient, server: FakeProviderServer, mode: str) -> None:
    """Priced models served by the fake server (a named provider, so not free)."""
    for name in ("main", "backup"):
        spec = resolve_model(f"openai:{name}-model@{server.base_url}", api_mode=mode, api_key=KEY)
        client.register(name, spec)


async def stream(client: ProviderClient) -> list[StreamEvent]:
    request = ModelRequest(model="main", system_prompt="", messages=[UserMessage(content="hi")])
    return [event async for event in client(request, AbortSignal())]


def reported(events: list[StreamEvent]) -> list[Usage]:
    """Every usage the stream reported: the notices', then the final message's."""
    usages = [e.usage for e in events if isinstance(e, RetryNotice | FallbackNotice) and e.usage]
    final = events[-1]
    assert isinstance(final, StreamDone | StreamError)
    return [*usages, final.message.usage]


def total(usages: list[Usage]) -> Usage:
    return reduce(lambda a, b: a + b, usages, Usage())


THINKING_ONLY = FakeReply(thinking="Let me think.", usage=FakeUsage(input=1_000_000, output=500))


@pytest.mark.parametrize("mode", MODES)
async def test_a_reasoning_only_reply_retried_as_incomplete_is_counted(
    fake_provider: FakeProviderServer, client: ProviderClient, mode: str
) -> None:
    register(client, fake_provider, mode)
    fake_provider.push(THINKING_ONLY, FakeReply("answer", usage=FakeUsage(input=10, output=5)))
    events = await stream(client)
    [notice] = [e for e in events if isinstance(e, RetryNotice)]
    assert notice.error_kind == "incomplete_response"
    assert notice.model == "main-model"
    assert notice.usage is not None
    assert (notice.usage.input, notice.usage.output) == (1_000_000, 500)
    assert notice.usage.cost == pytest.approx(1.0 + 500 * 2.0 / 1e6)
    final = events[-1]
    assert isinstance(final, StreamDone)
    assert (final.message.usage.input, final.message.usage.output) == (10, 5)


async def test_an_attempt_that_streamed_then_failed_is_counted(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    """Anthropic reports the prompt's tokens in ``message_start``: an overload after it was
    billed for them."""
    register(client, fake_provider, "anthropic_messages")
    streamed = FakeReply("a long reply " * 20, usage=FakeUsage(input=2_000_000, output=300))
    fake_provider.push(
        Fault("error_after_200", reply=streamed, after_events=6),
        FakeReply("second try", usage=FakeUsage(input=10, output=5)),
    )
    events = await stream(client)
    [notice] = [e for e in events if isinstance(e, RetryNotice)]
    assert notice.error_kind == "overloaded"
    assert notice.usage is not None
    assert notice.usage.input == 2_000_000
    assert notice.usage.cost == pytest.approx(2.0, rel=1e-3)
    assert isinstance(events[-1], StreamDone)


@pytest.mark.parametrize("mode", MODES)
async def test_failover_reports_each_attempt_once_and_names_the_model_that_answered(
    fake_provider: FakeProviderServer, fallback_client: ProviderClient, mode: str
) -> None:
    client = fallback_client
    register(client, fake_provider, mode)
    usages = [FakeUsage(input=100 * (i + 1), output=10) for i in range(3)]
    fake_provider.push(
        *(FakeReply(thinking="hmm", usage=u) for u in usages),
        FakeReply("from backup", usage=FakeUsage(input=7, output=3)),
    )
    events = await stream(client)
    retries = [e for e in events if isinstance(e, RetryNotice)]
    [fallback] = [e for e in events if isinstance(e, FallbackNotice)]
    assert [n.usage.input for n in retries if n.usage] == [100, 200]
    assert (fallback.from_model, fallback.to_model) == ("main", "backup")
    assert fallback.reason == "incomplete_response"
    assert fallback.usage is not None
    assert fallback.usage.input == 300
    final = events[-1]
    assert isinstance(final, StreamDone)
    assert final.message.model == "backup-model"
    assert final.message.content == "from backup"
    assert final.message.usage.cost == pytest.approx((7 * 10.0 + 3 * 20.0) / 1e6)
    spent = total(reported(events))
    assert (spent.input, spent.output) == (100 + 200 + 300 + 7, 10 + 10 + 10 + 3)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_that_fails_for_good_reports_its_last_attempt_in_the_error(
    fake_provider: FakeProviderServer, client: ProviderClient, mode: str
) -> None:
    register(client, fake_provider, mode)
    fake_provider.push(*(FakeReply(thinking="hmm", usage=FakeUsage(input=50, output=5)),) * 3)
    events = await stream(client)
    final = events[-1]
    assert isinstance(final, StreamError)
    assert final.message.error_kind == "incomplete_response"
    usages = reported(events)
    assert [u.input for u in usages] == [50, 50, 50]
    assert all(u.cost == pytest.approx((50 * 1.0 + 5 * 2.0) / 1e6) for u in usages)


async def test_an_http_error_reports_no_usage(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    register(client, fake_provider, "chat_completions")
    fake_provider.push(Fault("status", status=503), FakeReply("ok"))
    events = await stream(client)
    [notice] = [e for e in events if isinstance(e, RetryNotice)]
    assert notice.usage is None


# -- the budget counts them ---------------------------------------------------------------


def test_the_budget_adds_what_notices_report_without_counting_turns() -> None:
    budget = BudgetTracker(BudgetLimits(max_cost=1.0, max_total_tokens=1000))
    spent = Usage(input=300, output=20, cost=0.6)
    budget.observe(
        RetryNotice(
            attempt=1, max_attempts=3, delay=0, error_kind="overloaded", message="", usage=spent
        )
    )
    budget.observe(FallbackNotice(from_model="a", to_model="b", reason="auth"))  # no usage
    budget.observe(AgentEnd(messages=(), reason="completed"))  # not a notice: ignored
    assert (budget.turns, budget.input_tokens, budget.output_tokens) == (0, 300, 20)
    assert budget.exhausted() is None
    budget.observe(FallbackNotice(from_model="a", to_model="b", reason="x", usage=spent))
    assert budget.cost == pytest.approx(1.2)
    assert budget.exhausted() == "cost"
    budget.record(Usage(input=1, output=1, cost=0.0))
    assert budget.turns == 1
    snapshot = budget.snapshot()
    assert isinstance(snapshot, BudgetUpdated)
    assert {s.name: s.used for s in snapshot.budgets}["total_tokens"] == 642
