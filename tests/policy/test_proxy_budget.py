"""A spending proxy's "budget exceeded" (LiteLLM's virtual keys, the hub's hard spending
guarantee) is one clear line, never retried as a rate limit, over real loopback HTTP.

The bodies are LiteLLM's: newer proxies answer HTTP 429 with ``"type": "budget_exceeded"``
(and the HTTP status as a string ``code``), older ones HTTP 400 with ``"type":
"auth_error"``; both say "Budget has been exceeded! Current cost: ..., Max budget: ..."."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mibyan_jupyter.core import UserMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamError
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.errors import classify_stream_error
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeProviderServer, Fault, fake_model

NEW = {
    "error": {
        "message": "Budget has been exceeded! Current cost: 10.51, Max budget: 10.00",
        "type": "budget_exceeded",
        "param": None,
        "code": "429",
    }
}
OLD = {
    "error": {
        "message": "Budget has been exceeded! Current cost: 0.0010747, Max budget: 0.0",
        "type": "auth_error",
        "param": None,
        "code": 400,
    }
}


async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
    return signal.aborted


@pytest.fixture
async def client() -> AsyncIterator[ProviderClient]:
    made = ProviderClient(retry=RetryPolicy(max_retries=3, sleep=no_sleep))
    yield made
    await made.aclose()


@pytest.mark.parametrize(("status", "body"), [(429, NEW), (400, OLD)], ids=["429", "400"])
async def test_a_proxy_budget_error_is_one_line_and_not_retried(
    fake_provider: FakeProviderServer, client: ProviderClient, status: int, body: dict[str, object]
) -> None:
    fake_provider.push(Fault("status", status=status, body=body))
    client.register("main", fake_model(fake_provider))
    request = ModelRequest(model="main", system_prompt="", messages=[UserMessage(content="hi")])
    events = [event async for event in client(request, AbortSignal())]
    final = events[-1]
    assert isinstance(final, StreamError)
    message = final.message.error_message or ""
    assert "\n" not in message
    assert "Budget has been exceeded!" in message
    assert "the spending proxy's budget for your key is used up" in message
    assert "rate_limit" not in message
    assert len(fake_provider.requests) == 1  # a budget is no rate limit: no retry


def test_a_budget_error_inside_a_stream_is_billing_too() -> None:
    assert classify_stream_error("ExceededBudget: End User=alice over budget.") == "billing"
    assert classify_stream_error("anything", "budget_exceeded") == "billing"
