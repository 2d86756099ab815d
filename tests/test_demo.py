"""The no-key demo: the demo model and the `make demo` script."""

from __future__ import annotations

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    Agent,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequested,
    AutoApprove,
    ModelRequest,
    ToolExecutionEnd,
    UserMessage,
)
from mibyan_jupyter.core.demo_model import demo_model, demo_reply
from mibyan_jupyter.demo import main, save_note, word_stats


def request(prompt: str, tools: tuple = (), tool_choice: str = "auto") -> ModelRequest:  # type: ignore[type-arg]
    return ModelRequest(
        model="demo",
        system_prompt="",
        messages=[UserMessage(content=prompt)],
        tools=tools,
        tool_choice=tool_choice,  # type: ignore[arg-type]
    )


def test_demo_reply_calls_the_tools_the_prompt_names_in_order() -> None:
    reply = demo_reply(request("save_note about the word_stats", (word_stats.spec, save_note.spec)))
    assert [c.name for c in reply.calls] == ["save_note", "word_stats"]
    assert reply.thinking
    assert reply.calls[0].arguments == {"title": "demo title"}  # only required args, made up


def test_demo_reply_without_tools_answers_in_text() -> None:
    reply = demo_reply(request("hello there"))
    assert not reply.calls
    assert "hello there" in reply.text
    assert "demo model" in reply.text


async def test_demo_model_runs_a_tool_turn_with_approval() -> None:
    agent = Agent(
        stream_fn=demo_model(delay=0),
        tools=[word_stats, save_note],
        approval=ApprovalGate(ApprovalPolicy(), AutoApprove()),
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    answer = await agent.achat("please save_note this")
    check_grammar(recorder.events)
    assert [e.name for e in recorder.of(ApprovalRequested)] == ["save_note"]
    ends = recorder.of(ToolExecutionEnd)
    assert [e.name for e in ends] == ["save_note"]
    assert not ends[0].is_error
    assert "save_note" in answer
    assert "demo model" in answer


async def test_demo_script_prints_the_event_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert await main(["--yes"]) == 0
    out = capsys.readouterr().out
    assert "[approval requested] save_note" in out
    assert "[approval] save_note approved by user" in out
    assert "[agent_end] reason=completed" in out
    assert "Final answer:" in out
