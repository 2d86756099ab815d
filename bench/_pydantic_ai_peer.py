"""Peer agent loops driven offline, for the per-turn overhead comparison in bench/.

Each function runs one agent run of ``n_turns`` tool-calling turns (the model asks for a no-op
tool ``noop`` with no arguments, the tool returns, the model is asked again) followed by one final
text answer "done", and returns the wall time of the whole run in microseconds per turn.
No network: the model is a local function. Each returns ``None`` when its library is not
installed, so the bench still runs in an environment without the peers.

A warm-up run (same agent, same turn count) comes first, so one-time costs (schema building,
lazy imports, first event-loop creation) are not counted.
"""

from __future__ import annotations

import time
from typing import Any


def pydantic_ai_us_per_turn(n_turns: int) -> float | None:
    """Microseconds per tool-calling turn of a pydantic-ai ``Agent`` on a ``FunctionModel``."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.usage import RequestUsage, UsageLimits
    except ImportError:
        return None

    calls = 0

    def model_fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        usage = RequestUsage(input_tokens=10, output_tokens=5)
        if calls <= n_turns:
            part: TextPart | ToolCallPart = ToolCallPart(
                tool_name="noop", args={}, tool_call_id=f"call_{calls}"
            )
        else:
            part = TextPart(content="done")
        return ModelResponse(parts=[part], usage=usage)

    agent = Agent(FunctionModel(model_fn))

    @agent.tool_plain
    def noop() -> str:
        """Do nothing."""
        return "ok"

    # request_limit=None: the default (50) would stop the run; every other limit is off already.
    limits = UsageLimits(request_limit=None)

    def run_once() -> float:
        nonlocal calls
        calls = 0
        start = time.perf_counter()
        result = agent.run_sync("go", usage_limits=limits)
        elapsed = time.perf_counter() - start
        assert result.output == "done", result.output
        assert calls == n_turns + 1, calls
        return elapsed

    run_once()
    return run_once() * 1e6 / n_turns


def openai_agents_us_per_turn(n_turns: int) -> float | None:
    """Microseconds per tool-calling turn of an openai-agents ``Agent`` on a scripted ``Model``."""
    try:
        from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
        from agents.models.interface import Model
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )
    except ImportError:
        return None

    set_tracing_disabled(True)  # the default exporter would try to reach the OpenAI API
    calls = 0

    class ScriptedModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            nonlocal calls
            calls += 1
            usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
            item: ResponseFunctionToolCall | ResponseOutputMessage
            if calls <= n_turns:
                item = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{calls}",
                    call_id=f"call_{calls}",
                    name="noop",
                    arguments="{}",
                )
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                item = ResponseOutputMessage(
                    type="message",
                    id=f"msg_{calls}",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            return ModelResponse(output=[item], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the bench uses Runner.run_sync only")

    @function_tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    agent = Agent(name="bench", instructions="bench", model=ScriptedModel(), tools=[noop])

    def run_once() -> float:
        nonlocal calls
        calls = 0
        start = time.perf_counter()
        # One model call per turn; max_turns counts model calls, so allow the final answer too.
        result = Runner.run_sync(agent, "go", max_turns=n_turns + 1)
        elapsed = time.perf_counter() - start
        assert result.final_output == "done", result.final_output
        assert calls == n_turns + 1, calls
        return elapsed

    run_once()
    return run_once() * 1e6 / n_turns


if __name__ == "__main__":
    for n in (50, 200):
        print(f"n={n}: pydantic-ai {pydantic_ai_us_per_turn(n)} us/turn")
        print(f"n={n}: openai-agents {openai_agents_us_per_turn(n)} us/turn")
