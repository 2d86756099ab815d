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
    tool,
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


@tool(side_effects=False)
def describe(name: str, detail: str = "short") -> str:
    """Describe a variable.

    Args:
        name: The variable's name.
        detail: How much to say.
    """
    return f"{name} is a list"


@tool
def put_cell(source: str, where: str) -> str:
    """Insert a cell.

    Args:
        source: The cell's text.
        where: The id of the cell above.
    """
    return "inserted"


def test_inline_code_fills_string_arguments_in_order_and_skips_tool_names() -> None:
    """What lessons script: a variable's name, a cell id (notebooks/README.md)."""
    reply = demo_reply(
        request(
            "Use `describe` on `sales`, then put_cell below `c1`",
            (
                describe.spec,
                put_cell.spec,
            ),
        )
    )
    assert [c.arguments for c in reply.calls] == [
        {"name": "sales"},
        {"source": "demo source", "where": "c1"},
    ]


def test_a_fenced_block_is_a_cells_source() -> None:
    prompt = "Use put_cell below `abc`:\n```markdown\n# Title\n```\nand `ignored` inside text"
    reply = demo_reply(request(prompt, (put_cell.spec,)))
    assert reply.calls[0].arguments == {"source": "# Title", "where": "abc"}


def test_the_echo_bolds_only_the_first_line_so_a_fence_cannot_break_the_bold() -> None:
    reply = demo_reply(request("Run this:\n```python\nprint(1)\n```"))
    assert "You said: **Run this: …**" in reply.text
    bold, rest = reply.text.split("**\n\n", 1)
    assert "```" not in bold
    assert rest.startswith("```python\nprint(1)\n```\n\n"), "the rest is echoed as written"


async def test_a_message_steered_in_after_the_tools_is_answered_without_a_new_call() -> None:
    agent = Agent(stream_fn=demo_model(delay=0), tools=[word_stats])

    def steer(event: object) -> None:
        if getattr(event, "type", "") == "tool_execution_start":
            agent.steer("Stop and just give me the count.")

    agent.subscribe(steer)
    answer = await agent.achat("Use word_stats on this, please.")
    assert "You told me while I was working: **Stop and just give me the count.**" in answer
    assert "`word_stats` returned" in answer
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
