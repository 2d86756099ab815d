"""Per-turn overhead of the agent loop, against pydantic-ai (and openai-agents) side by side.

A run is N tool-calling turns (the model asks for a no-op tool, the tool returns, the model
is asked again) and one final answer. Our side: an ``Agent`` with the scripted model at
zero delay, streaming its events as a provider would. Peers: their agents driven by a local
function model (bench/_pydantic_ai_peer.py). Each figure is the best of ``--repeat`` runs
after a warm-up, in microseconds per turn.

Goals (issue 2): at N=1,000 at most 0.05x pydantic-ai's time per turn; our N=1,000 figure at
most 2x our N=50 figure (bounded work per turn); 8 parallel tools sleeping 0.5 s finish
within 0.6 s. The last line of output is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pydantic_ai_peer import openai_agents_us_per_turn, pydantic_ai_us_per_turn

from mibyan_jupyter.core import Agent, BudgetLimits, Call, Reply, ScriptedModel, tool


@tool(side_effects=False)
def noop() -> str:
    """Do nothing."""
    return "ok"


@tool(side_effects=False)
def nap() -> str:
    """Sleep half a second in a worker thread."""
    time.sleep(0.5)
    return "rested"


def _script(n_turns: int) -> ScriptedModel:
    replies: list[Reply | str] = [Reply(calls=[Call("noop", {})]) for _ in range(n_turns)]
    replies.append("done")
    return ScriptedModel(replies, record=False)


async def _our_run(n_turns: int) -> float:
    agent = Agent(stream_fn=_script(n_turns), tools=[noop], budget=BudgetLimits(max_turns=None))
    gc.collect()
    start = time.perf_counter()
    answer = await agent.achat("go")
    elapsed = time.perf_counter() - start
    assert answer == "done", answer
    assert len(agent.state.messages) == 2 * n_turns + 2
    return elapsed


def ours_us_per_turn(n_turns: int, repeat: int) -> float:
    asyncio.run(_our_run(n_turns))  # warm-up
    return min(asyncio.run(_our_run(n_turns)) for _ in range(repeat)) * 1e6 / n_turns


async def _parallel_run() -> float:
    model = ScriptedModel([Reply(calls=[Call("nap", {}) for _ in range(8)]), "done"], record=False)
    agent = Agent(stream_fn=model, tools=[nap])
    start = time.perf_counter()
    answer = await agent.achat("go")
    elapsed = time.perf_counter() - start
    assert answer == "done"
    return elapsed


def _peer(fn: object, n_turns: int, repeat: int) -> float | None:
    results = [fn(n_turns) for _ in range(repeat)]  # type: ignore[operator]
    values = [r for r in results if r is not None]
    return min(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--peer-repeat", type=int, default=1)
    args = parser.parse_args()

    figures: dict[str, float | None] = {}
    print(
        f"{'N':>6} {'ours us/turn':>14} {'pydantic-ai':>14} {'openai-agents':>14} {'ratio (pai)':>12}"
    )
    for n in args.sizes:
        ours = ours_us_per_turn(n, args.repeat)
        pai = _peer(pydantic_ai_us_per_turn, n, args.peer_repeat)
        oai = _peer(openai_agents_us_per_turn, n, args.peer_repeat)
        ratio = ours / pai if pai else None
        figures[f"us_per_turn_{n}"] = round(ours, 1)
        figures[f"pydantic_ai_us_per_turn_{n}"] = round(pai, 1) if pai else None
        figures[f"openai_agents_us_per_turn_{n}"] = round(oai, 1) if oai else None
        print(
            f"{n:>6} {ours:>14.1f} {pai or float('nan'):>14.1f} {oai or float('nan'):>14.1f} "
            f"{(ratio if ratio is not None else float('nan')):>12.4f}"
        )
    largest, smallest = max(args.sizes), min(args.sizes)
    pai_largest = figures.get(f"pydantic_ai_us_per_turn_{largest}")
    ours_largest = figures[f"us_per_turn_{largest}"]
    assert ours_largest is not None
    figures["ratio_vs_pydantic_ai"] = round(ours_largest / pai_largest, 4) if pai_largest else None
    ours_smallest = figures[f"us_per_turn_{smallest}"]
    assert ours_smallest is not None
    figures["growth_1000_vs_50"] = round(ours_largest / ours_smallest, 3)
    parallel = min(asyncio.run(_parallel_run()) for _ in range(args.repeat))
    figures["parallel_8x0_5s_s"] = round(parallel, 3)
    print(f"ratio vs pydantic-ai at N={largest}: {figures['ratio_vs_pydantic_ai']} (goal <= 0.05)")
    print(f"growth N={largest} vs N={smallest}: {figures['growth_1000_vs_50']} (goal <= 2)")
    print(f"8 parallel tools x 0.5 s: {parallel:.3f} s (goal <= 0.6)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
