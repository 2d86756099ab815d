"""A run's budget and the session's usage ledger count every attempt (issue 10, item 9).

Needs the loop to pass each event to :meth:`BudgetTracker.observe` and the store writer to
write a ledger row per notice that carries usage. A ``--max-cost`` run must not overspend
through retries: here each attempt costs $0.40 and the budget is $1.00. The budget gate
(core/budget_gate.py) counts each retried attempt as its notice arrives, and before the
next attempt checks that what is left can pay for it (an attempt costs at least what the
last one was billed): after two attempts ($0.80) a third would overshoot, so the call ends
there, and the summary, which would cost as much, is not sent either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import Agent, AgentEnd, AssistantMessage, BudgetUpdated, tool
from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.pricing import Price, PriceTable, chain_prices
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import resolve_model
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, FakeUsage

MILLION = FakeUsage(input=1_000_000)
"""$0.40 with the price below."""
PRICES = PriceTable({"priced": Price(0.40, 1.0)})


@tool
def lookup(name: str) -> str:
    """Look a name up."""
    return f"{name}: found"


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
        return signal.aborted

    made = ProviderClient(retry=RetryPolicy(sleep=no_sleep), prices=PRICES)
    spec = resolve_model(f"openai:priced@{fake_provider.base_url}", api_key="sk-budget-key-000001")
    made.register("main", spec)
    yield made
    await made.aclose()


def script(server: FakeProviderServer) -> None:
    """Two replies with only reasoning (asked again), then a tool call, then what the run
    says next: a summary when the budget stopped it, a second tool turn when it did not."""
    server.push(
        FakeReply(thinking="hmm", usage=MILLION),
        FakeReply(thinking="hmm", usage=MILLION),
        FakeReply(calls=[FakeCall("lookup", {"name": "a"})], usage=MILLION),
        FakeReply("Summary: looked up a.", usage=MILLION),
        FakeReply(calls=[FakeCall("lookup", {"name": "b"})], usage=MILLION),
        FakeReply("Done with b.", usage=MILLION),
    )


async def test_retried_attempts_count_against_a_cost_budget(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    script(fake_provider)
    recorder = Recorder()
    agent = Agent(
        stream_fn=client,
        model="main",
        tools=[lookup],
        budget=BudgetLimits(max_cost=1.0),
        loop_options={"prices": chain_prices([("openai", "priced")], PRICES)},
    )
    agent.subscribe(recorder)
    await agent.achat("look up a")
    [end] = recorder.of(AgentEnd)
    assert end.reason == "budget_exhausted"
    snapshot = recorder.of(BudgetUpdated)[-1]
    used = {status.name: status.used for status in snapshot.budgets}
    assert used["cost"] == pytest.approx(2 * 0.40)  # under the cap: never overshot
    assert used["input_tokens"] == 2_000_000
    assert len(fake_provider.requests) == 2  # the third attempt and the summary never went
    assert fake_provider.pending == 4
    final = end.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.error_message is not None
    assert "budget" in final.error_message
    check_grammar(recorder.events)


async def test_the_ledger_has_a_row_for_every_billed_attempt(
    fake_provider: FakeProviderServer, client: ProviderClient, tmp_path: Path
) -> None:
    script(fake_provider)
    with SessionStore(tmp_path / "sessions.sqlite3") as store:
        agent, info = recorded_agent(store, stream_fn=client, model="main", tools=[lookup])
        await agent.achat("look up a")
        rows = store.db.conn.execute(
            "SELECT message_seq IS NULL, input_tokens, cost FROM usage_ledger"
            " WHERE session_id = ? ORDER BY id",
            (info.id,),
        ).fetchall()
    detached = [row for row in rows if row[0]]
    assert len(detached) == 2  # the two retried attempts, not tied to a message
    assert sum(row[1] for row in rows) == 1_000_000 * len(rows)
    assert sum(row[2] for row in rows) == pytest.approx(0.40 * len(rows))
    assert len(rows) == 2 + 2  # and the two kept replies (the tool call, the answer)
