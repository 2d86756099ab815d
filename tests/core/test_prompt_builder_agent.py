"""The prompt builder wired into the Agent (issue 10, item 3): each run's system prompt is
the builder's, byte-identical across turns and runs while no layer changes."""

from __future__ import annotations

from mibyan_jupyter.core import Agent, ModelRequest
from mibyan_jupyter.core.fakes import Call, FunctionModel, Reply
from mibyan_jupyter.core.prompt import PromptBuilder
from mibyan_jupyter.core.tools import tool


@tool(side_effects=False)
def look() -> str:
    """Look around."""
    return "ok"


def recording() -> tuple[FunctionModel, list[ModelRequest]]:
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Reply | str:
        requests.append(request)
        return Reply(calls=[Call("look")]) if len(requests) % 2 else "done"

    return FunctionModel(reply), requests


async def test_the_system_prompt_is_the_builders_and_stays_byte_identical() -> None:
    builder = PromptBuilder(instructions="Be brief.", context="Notebook: a.ipynb")
    builder.pin("never delete files")
    model, requests = recording()
    agent = Agent(stream_fn=model, tools=[look], prompt_builder=builder)
    await agent.achat("one")
    await agent.achat("two")
    prompts = [r.system_prompt for r in requests]
    assert len(prompts) == 4
    assert len(set(prompts)) == 1
    assert all(p is prompts[0] for p in prompts)
    assert "Be brief." in prompts[0]
    assert "look" in prompts[0]
    assert "never delete files" in prompts[0]
    assert builder.version == 1
    builder.pin("answer in French")
    await agent.achat("three")
    assert "answer in French" in requests[-1].system_prompt
    assert builder.version == 2


async def test_system_prompt_seeds_the_instructions_and_run_conversation_sets_them() -> None:
    builder = PromptBuilder()
    model, requests = recording()
    agent = Agent(stream_fn=model, system_prompt="Start.", prompt_builder=builder)
    assert builder.instructions == "Start."
    await agent.arun_conversation("hi", system_message="Be kind.")
    assert builder.instructions == "Be kind."
    assert requests[0].system_prompt.startswith("Be kind.")
    await agent.arun_conversation("again")
    assert requests[-1].system_prompt.startswith("Be kind.")
