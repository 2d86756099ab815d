"""Cost of one long streamed reply in the loop, per delta, against pydantic-ai.

A reply of 5k, 20k and 80k tokens arrives in deltas of one token (~4 characters): once as
text, once as the arguments of one tool call (then a short final answer). Our side: an
``Agent`` whose stream function yields the deltas as a provider's parser would, with one
no-op subscriber. Peer: pydantic-ai's ``Agent`` on a ``FunctionModel(stream_function=...)``
yielding the same deltas; text consumed with ``run_stream(...).stream_text(delta=True,
debounce_by=None)``, tool-call arguments with ``run_stream_events`` (``stream_text`` never
shows arguments). Each figure is the best of ``--repeat`` runs after a warm-up.

Goals (issue 10, item 8): microseconds per delta flat from 5k to 80k tokens (growth <= 1.5,
text and arguments), the 80k-token text reply in <= 1 s of loop time and <= 0.2x
pydantic-ai's. The last line of output is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from mibyan_jupyter.core import Agent, AgentEvent, tool
from mibyan_jupyter.core.messages import AssistantMessage, FunctionCall, ToolCall
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import (
    ModelRequest,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

TOKEN = "tok "
"""One delta of text: one token of about four characters."""
CODE_TOKEN = "x1\\n"
"""One delta of arguments: four characters of a JSON string (an escaped newline in it)."""
CALL_HEAD, CALL_TAIL = '{"code": "', '"}'


@tool(side_effects=False)
def write(code: str) -> str:
    """Accept a long piece of code."""
    return f"{len(code)} characters"


def _text_stream(n: int) -> Callable[..., AsyncIterator[StreamEvent]]:
    async def stream(request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        yield StreamStart(model="bench", api="bench")
        yield TextStart()
        for _ in range(n):
            yield TextDelta(delta=TOKEN)
        yield TextEnd()
        yield StreamDone(message=AssistantMessage(content=TOKEN * n, model="bench"))

    return stream


def _args_stream(n: int) -> Callable[..., AsyncIterator[StreamEvent]]:
    async def stream(request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        yield StreamStart(model="bench", api="bench")
        if any(m.role == "tool" for m in request.messages):  # the tool ran: the answer
            yield StreamDone(message=AssistantMessage(content="done", model="bench"))
            return
        yield ToolCallStart(index=0, id="call_1", name="write")
        yield ToolCallDelta(index=0, delta=CALL_HEAD)
        for _ in range(n):
            yield ToolCallDelta(index=0, delta=CODE_TOKEN)
        yield ToolCallDelta(index=0, delta=CALL_TAIL)
        arguments = CALL_HEAD + CODE_TOKEN * n + CALL_TAIL
        call = ToolCall(id="call_1", function=FunctionCall(name="write", arguments=arguments))
        yield ToolCallEnd(index=0, call=call)
        message = AssistantMessage(tool_calls=(call,), stop_reason="tool_use", model="bench")
        yield StreamDone(message=message)

    return stream


def _no_op(event: AgentEvent) -> None:
    """The subscriber: sees every event, reads nothing."""


async def _our_run(n: int, arguments: bool) -> float:
    stream_fn = _args_stream(n) if arguments else _text_stream(n)
    agent = Agent(stream_fn=stream_fn, tools=[write])
    agent.subscribe(_no_op)
    gc.collect()
    start = time.perf_counter()
    answer = await agent.achat("go")
    elapsed = time.perf_counter() - start
    assert answer == ("done" if arguments else TOKEN * n), answer[:40]
    return elapsed


def _best(run: Callable[[], Coroutine[Any, Any, float]], repeat: int) -> float:
    asyncio.run(run())  # warm-up
    return min(asyncio.run(run()) for _ in range(repeat))


def pydantic_ai_seconds(n: int, arguments: bool) -> float | None:
    """One pydantic-ai run of the same reply, in seconds; ``None`` without pydantic-ai."""
    try:
        from pydantic_ai import Agent as PaiAgent
        from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
    except ImportError:
        return None

    async def stream_function(messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        if not arguments:
            for _ in range(n):
                yield TOKEN
            return
        if len(messages) > 1:  # the tool ran: the answer
            yield "done"
            return
        yield {0: DeltaToolCall(name="write", json_args=CALL_HEAD, tool_call_id="call_1")}
        for _ in range(n):
            yield {0: DeltaToolCall(json_args=CODE_TOKEN)}
        yield {0: DeltaToolCall(json_args=CALL_TAIL)}

    agent = PaiAgent(FunctionModel(stream_function=stream_function))

    @agent.tool_plain
    def write(code: str) -> str:
        """Accept a long piece of code."""
        return f"{len(code)} characters"

    async def run_text() -> float:
        start = time.perf_counter()
        parts = []
        async with agent.run_stream("go") as result:
            async for delta in result.stream_text(delta=True, debounce_by=None):
                parts.append(delta)
        elapsed = time.perf_counter() - start
        assert "".join(parts) == TOKEN * n
        return elapsed

    async def run_events() -> float:
        start = time.perf_counter()
        async with agent.run_stream_events("go") as events:
            async for _event in events:
                pass
        return time.perf_counter() - start

    return _best(run_events if arguments else run_text, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 20_000, 80_000])
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    print(f"{'tokens':>7} {'kind':>5} {'ours s':>9} {'us/delta':>9} {'pydantic-ai s':>14}")
    for n in args.sizes:
        for kind in ("text", "args"):
            ours = _best(lambda n=n, kind=kind: _our_run(n, kind == "args"), args.repeat)
            peer = pydantic_ai_seconds(n, kind == "args")
            figures[f"{kind}_s_{n // 1000}k"] = round(ours, 4)
            figures[f"{kind}_us_per_delta_{n // 1000}k"] = round(ours * 1e6 / n, 2)
            figures[f"pydantic_ai_{kind}_s_{n // 1000}k"] = round(peer, 4) if peer else None
            peer_text = f"{peer:>14.3f}" if peer else f"{'-':>14}"
            print(f"{n:>7} {kind:>5} {ours:>9.4f} {ours * 1e6 / n:>9.2f} {peer_text}")
    small, large = f"{min(args.sizes) // 1000}k", f"{max(args.sizes) // 1000}k"
    text_small, text_large = (figures[f"text_us_per_delta_{k}"] or 0.0 for k in (small, large))
    args_small, args_large = (figures[f"args_us_per_delta_{k}"] or 0.0 for k in (small, large))
    loop_s, peer_s = figures[f"text_s_{large}"] or 0.0, figures[f"pydantic_ai_text_s_{large}"]
    summary = {
        f"us_per_delta_{small}": text_small,
        f"us_per_delta_{large}": text_large,
        f"growth_{large}_vs_{small}": round(text_large / text_small, 3),
        f"args_growth_{large}_vs_{small}": round(args_large / args_small, 3),
        f"loop_s_{large}": loop_s,
        f"pydantic_ai_s_{large}": peer_s,
        f"ratio_vs_pydantic_ai_{large}": round(loop_s / peer_s, 4) if peer_s else None,
    }
    print(
        f"growth {large} vs {small}: text {summary[f'growth_{large}_vs_{small}']}, "
        f"arguments {summary[f'args_growth_{large}_vs_{small}']} (goal <= 1.5)"
    )
    print(
        f"the {large}-token text reply: {loop_s:.3f} s (goal <= 1.0), "
        f"{summary[f'ratio_vs_pydantic_ai_{large}']} x pydantic-ai (goal <= 0.2)"
    )
    print(json.dumps(summary | {"details": figures}))


if __name__ == "__main__":
    main()
