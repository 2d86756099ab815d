"""The cost cap is never overshot: 100 random scripts with known prices, through the real
loop, the real provider client and the loopback fake server (issue 11, "Honest budgets").

The server bills honestly and in its own way, never with the agent's estimator: a
request's input tokens are what ``testing/context_window.py`` counts in the wire body
(UTF-8 bytes of system, messages and tool schemas at 3 bytes a token, stricter than the
agent's 3.6 characters), and its output is the scripted length cut at the request's own
``max_completion_tokens`` (a real model never bills more than it was allowed). Each
script draws a cap, prices, a configured ``max_tokens`` (or none), a summary size, how
often the model calls a tool, how long its replies and tool results are. The bill is
added up from the server's side, request by request, and compared with the cap.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from mibyan_jupyter.core import Agent, BudgetLimits, tool
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.pricing import Price, PriceTable, chain_prices
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import resolve_model
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, FakeUsage
from mibyan_jupyter.testing.context_window import request_tokens
from mibyan_jupyter.testing.scripts import RecordedRequest

SCRIPTS = 100


def billing(
    rng: random.Random, price: Price, bill: list[float], tool_share: float, longest: int
) -> Callable[[RecordedRequest], FakeReply]:
    """The fake server's answer to each request, and what it bills for it."""

    def answer(request: RecordedRequest) -> FakeReply:
        body = request.body or {}
        allowed = int(body.get("max_completion_tokens") or 100_000)
        tokens_in = request_tokens(body)
        tokens_out = min(rng.randint(1, longest), allowed)
        bill.append((tokens_in * price.input + tokens_out * price.output) / 1_000_000)
        usage = FakeUsage(input=tokens_in, output=tokens_out)
        if body.get("tools") and rng.random() < tool_share:
            call = FakeCall("lookup", {"name": f"n{request.number}", "size": rng.randint(1, 3000)})
            return FakeReply(calls=[call], usage=usage)
        return FakeReply("words " * rng.randint(1, 40), usage=usage)

    return answer


@tool
def lookup(name: str, size: int = 10) -> str:
    """Look a name up."""
    return f"{name}: " + "x" * size


async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
    return signal.aborted


async def one_script(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    price = Price(rng.uniform(0.05, 5.0), rng.uniform(0.2, 20.0))
    cap = rng.choice([0.002, 0.005, 0.01, 0.03, 0.1])
    bill: list[float] = []
    answer = billing(rng, price, bill, rng.uniform(0.6, 0.97), rng.choice([50, 400, 3000]))
    table = PriceTable({"priced": price})
    with FakeProviderServer(fallback=answer) as server:
        client = ProviderClient(retry=RetryPolicy(sleep=no_sleep), prices=table)
        spec = resolve_model(f"openai:priced@{server.base_url}", api_key="sk-random-budget-1")
        client.register("main", spec)
        loop_options: dict[str, Any] = {
            "prices": chain_prices([("openai", "priced")], table),
            "summary_max_tokens": rng.choice([200, 1024]),
        }
        if rng.random() < 0.5:
            loop_options["max_tokens"] = rng.choice([100, 500, 4000])
        agent = Agent(
            stream_fn=client,
            model="main",
            tools=[lookup],
            budget=BudgetLimits(max_turns=rng.choice([None, 3, 30]), max_cost=cap),
            loop_options=loop_options,
        )
        try:
            await agent.prompt("look things up " * rng.randint(1, 200))
        finally:
            await client.aclose()
        requests = len(server.requests)
    return {
        "cap": cap,
        "spent": sum(bill),
        "requests": requests,
        "reason": agent.state.last_end_reason,
    }


@pytest.mark.slow
async def test_the_cost_cap_is_never_overshot_across_100_random_scripts() -> None:
    results = [await one_script(seed) for seed in range(SCRIPTS)]
    over = [(seed, r) for seed, r in enumerate(results) if r["spent"] > r["cap"] * (1 + 1e-9)]
    assert over == []
    # the scripts exercise the cap: many reach it, and many make calls before they do
    reasons = [r["reason"] for r in results]
    assert reasons.count("budget_exhausted") >= 40
    assert reasons.count("completed") >= 10
    assert sum(1 for r in results if r["requests"] >= 3) >= 20
    used = sorted(r["spent"] / r["cap"] for r in results if r["reason"] == "budget_exhausted")
    assert used[-1] > 0.9  # calls are clamped to the cap, not stopped far before it
    assert sum(1 for share in used if share > 0.5) >= 15
