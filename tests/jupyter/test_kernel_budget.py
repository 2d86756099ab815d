"""``--max-cost`` in a real ipykernel: a handful of random scripts with known prices never
spend more than the cap (issue 11, "Honest budgets"; the 100-script version runs through
the loop and the provider client in one process: tests/core/test_budget_gate_random.py).

The kernel prices the model from a ``MIBYAN_PRICES`` file; the loopback fake server in the
test process bills each request honestly in its own way (its prompt counted in the wire
body at 3 bytes a token, its output cut at the request's ``max_completion_tokens``), and
the bill is added up on the server's side. Without a front end the budget's question is
answered "Summarize now", as the card says."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_driver import KernelDriver

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, FakeUsage
from mibyan_jupyter.testing.context_window import request_tokens
from mibyan_jupyter.testing.scripts import RecordedRequest

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(240)]

INPUT, OUTPUT = 2.0, 8.0
"""USD per million tokens, in the kernel's price file and on the server's bill."""


class Biller:
    """The fake server's answers: a tool call or an answer, billed as it is sent."""

    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.bill: list[float] = []
        self.tool_share = 0.8
        self.longest = 400

    def __call__(self, request: RecordedRequest) -> FakeReply:
        body = request.body or {}
        allowed = int(body.get("max_completion_tokens") or 100_000)
        tokens_in = request_tokens(body)
        tokens_out = min(self.rng.randint(1, self.longest), allowed)
        self.bill.append((tokens_in * INPUT + tokens_out * OUTPUT) / 1_000_000)
        usage = FakeUsage(input=tokens_in, output=tokens_out)
        if body.get("tools") and self.rng.random() < self.tool_share:
            return FakeReply(calls=[FakeCall("list_variables", {})], usage=usage)
        return FakeReply("words " * self.rng.randint(1, 30), usage=usage)


@pytest.fixture
def biller() -> Biller:
    return Biller()


@pytest.fixture
def server(biller: Biller) -> Iterator[FakeProviderServer]:
    with FakeProviderServer(fallback=biller) as fake:
        yield fake


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelDriver]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai:priced": {"input": INPUT, "output": OUTPUT}}))
    env = {
        "MIBYAN_PRICES": str(prices),
        "OPENAI_API_KEY": "sk-kernel-budget-0001",
        "MIBYAN_MEMORY_DIR": str(tmp_path / "memory"),
    }
    driver = KernelDriver(tmp_path, env=env)
    try:
        assert driver.run("%load_ext mibyan_jupyter").reply["status"] == "ok"  # type: ignore[index]
        yield driver
    finally:
        driver.close()


def test_a_handful_of_random_cells_never_spend_more_than_their_cap(
    kernel: KernelDriver, server: FakeProviderServer, biller: Biller
) -> None:
    model = f"openai:priced@{server.base_url}"
    spent: list[tuple[float, float, int]] = []
    for seed in range(5):
        rng = random.Random(seed)
        cap = rng.choice([0.01, 0.02, 0.05])
        biller.rng, biller.tool_share = rng, rng.uniform(0.7, 0.95)
        biller.longest = rng.choice([100, 400, 2000])
        before, sent = len(biller.bill), len(server.requests)
        prompt = "look at my variables " * rng.randint(1, 50)
        line = f"--session new --model {model} --tools inspect --max-cost {cap}"
        execution = kernel.run(f"%%agent {line}\n{prompt}", timeout=60)
        assert execution.reply is not None
        assert execution.reply["status"] == "ok", execution.text()
        spent.append((cap, sum(biller.bill[before:]), len(server.requests) - sent))
    over = [(cap, cost) for cap, cost, _ in spent if cost > cap * (1 + 1e-9)]
    assert over == []
    assert sum(calls for *_, calls in spent) >= 8  # the cells did call the model
    # the ledger of the kernel's sessions says the same (priced by the kernel's table)
    for session_id, cost in kernel.query(
        "SELECT session_id, SUM(cost) FROM usage_ledger GROUP BY session_id"
    ):
        assert cost is not None, session_id
        assert cost <= 0.05 + 1e-9
