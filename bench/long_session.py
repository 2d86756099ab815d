"""A long session against a window the server enforces itself: 2,000 tool turns, 2 KB results.

The agent (``CompactionSettings(window=32000)``) talks to the loopback fake provider over
real HTTP through ``ProviderClient``; the server refuses any prompt over 32,000 tokens
counted its own way (``mibyan_jupyter.testing.context_window``: UTF-8 bytes / 3, stricter
than real tokenizers), so the agent's own estimator is never graded by itself
(docs/architecture.md, "Context compression"). The fake reports the input tokens it counted
as the request's usage, as a real provider reports what it enforces, so the agent's
calibration sees the same count. Every tool turn returns 2 KB of fresh text; a tool-less
request (the summary) gets a short summary back.

Figures (issue 10, Benchmarks), the last line one JSON object:

* ``max_request_tokens_ratio_to_window``: the largest prompt the server counted / window
  (goal <= 1.0);
* ``compactions``: CompactionNotice events seen;
* ``invalid_requests``: requests the server refused for their size (goal = 0);
* ``growth_per_turn_2000_vs_100``: mean wall time per turn over the last 100 turns / over
  turns 1-100 (goal <= 2: a turn costs the same however long the session);
* ``rss_growth_mb_2000_turns``: resident memory after the last turn minus after turn 100
  (goal <= 100: the process keeps neither every event nor every partial snapshot).

``MIBYAN_BENCH_TURNS`` scales the session for a quick check (the key names stay).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time

from mibyan_jupyter.core import Agent, BudgetLimits, tool
from mibyan_jupyter.core.compaction import CompactionSettings
from mibyan_jupyter.core.events import AgentEvent, TurnEnd
from mibyan_jupyter.core.notices import CompactionNotice
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.testing import (
    FakeCall,
    FakeProviderServer,
    FakeReply,
    FakeUsage,
    RecordedRequest,
    ScriptItem,
    fake_model,
)
from mibyan_jupyter.testing.context_window import request_tokens

TURNS = int(os.environ.get("MIBYAN_BENCH_TURNS", "2000"))
WINDOW = 32_000
RESULT_BYTES = 2_048
SAMPLE = 100  # turns per timing window
LINE = "row {n:05d}: value={v:.6f} status=ok note=measured on the loopback fake provider\n"


@tool(side_effects=False)
def read_rows(page: int) -> str:
    """Return about 2 KB of fresh rows of page ``page``."""
    out: list[str] = []
    size = 0
    while size < RESULT_BYTES:
        line = LINE.format(n=page * 100 + len(out), v=(page * 7919 + len(out)) % 1000 / 7.0)
        out.append(line)
        size += len(line)
    return "".join(out)[:RESULT_BYTES]


class Model:
    """The fake server's fallback: a tool call per turn until ``turns``, then an answer;
    a summary for the tool-less summary request. Usage = the server's own count."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.calls = 0
        self.summaries = 0
        self.max_turn_tokens = 0  # the largest prompt of a tool turn (server's count)
        self.max_summary_tokens = 0  # the largest summary request (server's count)
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        body = request.body or {}
        tokens = request_tokens(body)
        usage = FakeUsage(input=tokens, output=20)
        if not body.get("tools"):
            with self._lock:
                self.max_summary_tokens = max(self.max_summary_tokens, tokens)
                self.summaries += 1
                k = self.summaries
            text = f"Summary {k}: the user asked to read pages of rows; pages read so far "
            return FakeReply(text + "were read in order, all with status ok.", usage=usage)
        with self._lock:
            self.max_turn_tokens = max(self.max_turn_tokens, tokens)
            self.calls += 1
            n = self.calls
        if n > self.turns:
            return FakeReply("All pages read.", usage=usage)
        return FakeReply(calls=[FakeCall("read_rows", {"page": n})], usage=usage, chunk_size=64)


def rss_mb() -> float:
    """Resident memory now (not the peak), from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def run(turns: int) -> dict[str, float | int]:
    model = Model(turns)
    server = FakeProviderServer(fallback=model, context_window=WINDOW, keep_requests=10)
    client = ProviderClient()
    client.register("main", fake_model(server, api_mode="chat_completions"))
    agent = Agent(
        stream_fn=client,
        model="main",
        system_prompt="You read pages of rows with read_rows, one page a turn.",
        tools=[read_rows],
        budget=BudgetLimits(max_turns=None),
        compaction=CompactionSettings(window=WINDOW),
    )
    ends: list[float] = []
    rss: dict[str, float] = {}
    compactions = 0

    def watch(event: AgentEvent) -> None:
        nonlocal compactions
        if isinstance(event, CompactionNotice):
            compactions += 1
        elif isinstance(event, TurnEnd) and event.tool_results:
            ends.append(time.perf_counter())
            if len(ends) == SAMPLE:
                gc.collect()
                rss["at_100"] = rss_mb()

    agent.subscribe(watch)
    start = time.perf_counter()
    try:
        answer = await agent.achat("Read every page of rows, one page a turn.")
    finally:
        await client.aclose()
        server.close()
    gc.collect()
    rss["end"] = rss_mb()
    assert answer == "All pages read.", answer
    assert len(ends) == turns, (len(ends), turns)
    times = [start, *ends]
    first = (times[SAMPLE] - times[0]) / SAMPLE
    last = (times[-1] - times[-1 - SAMPLE]) / SAMPLE
    return {
        "turns": turns,
        "window": WINDOW,
        "max_request_tokens": server.max_request_tokens,
        "max_request_tokens_ratio_to_window": round(server.max_request_tokens / WINDOW, 4),
        "max_turn_request_tokens": model.max_turn_tokens,
        "max_summary_request_tokens": model.max_summary_tokens,
        "compactions": compactions,
        "summary_requests": model.summaries,
        "invalid_requests": len(server.overflows),
        "ms_per_turn_first_100": round(first * 1e3, 3),
        "ms_per_turn_last_100": round(last * 1e3, 3),
        "growth_per_turn_2000_vs_100": round(last / first, 3),
        "rss_growth_mb_2000_turns": round(rss["end"] - rss["at_100"], 1),
        "total_s": round(time.perf_counter() - start, 2),
        "messages_at_end": len(agent.state.messages),
    }


def main() -> None:
    if TURNS < 2 * SAMPLE:
        raise SystemExit(f"MIBYAN_BENCH_TURNS must be at least {2 * SAMPLE}")
    figures = asyncio.run(run(TURNS))
    print(
        f"{figures['turns']} turns in {figures['total_s']} s; largest prompt "
        f"{figures['max_request_tokens']} of {WINDOW} tokens (goal <= 1.0: "
        f"{figures['max_request_tokens_ratio_to_window']}); {figures['compactions']} compactions; "
        f"{figures['invalid_requests']} refused (goal 0); per turn last/first 100: "
        f"{figures['growth_per_turn_2000_vs_100']} (goal <= 2); RSS growth "
        f"{figures['rss_growth_mb_2000_turns']} MB (goal <= 100)"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
