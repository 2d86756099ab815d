"""The end-of-run memory flush (docs/architecture.md, "Memory"): a run that ended with an
answer that changed something (a changing tool call, a stated preference) asks the cell's
model once, tool-less, over real loopback HTTP, and keeps at most a few new facts in the
real memory files; it never fails the cell and never holds its end for long."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.context import flush_after_run
from mibyan_jupyter.jupyter.cell.options import parse_cell_line
from mibyan_jupyter.jupyter.cell.plan import plan_from_options
from mibyan_jupyter.jupyter.defaults import BUILTIN
from mibyan_jupyter.memory import Memory
from mibyan_jupyter.memory.flush import changed_something
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, Fault

KEY = "sk-proj-" + "a1B2c3D4" * 6


def plan(server: FakeProviderServer, tools: str = "default,memory") -> CellPlan:
    line = f"--model fake:m@{server.base_url} --tools {tools}"
    return plan_from_options("go", parse_cell_line(line, BUILTIN), BUILTIN, headless=True)


def wrote_a_file() -> list[Message]:
    call = ToolCall(id="c1", function=FunctionCall(name="write_file", arguments="{}"))
    return [
        UserMessage(content="convert sales.csv to EUR and save it"),
        AssistantMessage(content="Saving.", tool_calls=(call,)),
        ToolMessage(content="wrote out.csv", tool_call_id="c1", name="write_file"),
        AssistantMessage(content="Saved out.csv in EUR."),
    ]


def only_read() -> list[Message]:
    return [UserMessage(content="what is 2 + 2?"), AssistantMessage(content="4")]


def test_what_counts_as_a_change() -> None:
    assert changed_something(wrote_a_file())
    assert not changed_something(only_read())
    assert changed_something([UserMessage(content="From now on, use polars please")])
    assert changed_something([UserMessage(content="I prefer seaborn for plots")])


async def test_a_run_that_wrote_a_file_keeps_new_facts(
    fake_provider: FakeProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # a secret the model repeats is redacted
    memory = Memory(tmp_path / "memory")
    fake_provider.push(
        FakeReply(f"- sales.csv is in USD, out.csv in EUR\n- user: prefers seaborn\n- key {KEY}")
    )
    added = await flush_after_run(plan(fake_provider), "completed", wrote_a_file(), memory=memory)
    assert added[:2] == ["sales.csv is in USD, out.csv in EUR", "prefers seaborn"]
    assert memory.file("memory").entries()[0] == "sales.csv is in USD, out.csv in EUR"
    assert memory.file("user").entries() == ["prefers seaborn"]
    assert KEY not in memory.file("memory").path.read_text()  # redacted
    body = fake_provider.requests[-1].body
    assert body is not None
    assert not body.get("tools")  # tool-less
    assert "convert sales.csv" in str(body["messages"])
    fake_provider.push(FakeReply("- user: prefers seaborn"))  # known already: nothing added
    assert (
        await flush_after_run(plan(fake_provider), "completed", wrote_a_file(), memory=memory) == []
    )
    assert memory.file("user").entries() == ["prefers seaborn"]


async def test_at_most_five_facts_a_flush(
    fake_provider: FakeProviderServer, tmp_path: Path
) -> None:
    memory = Memory(tmp_path / "memory")
    fake_provider.push(FakeReply("\n".join(f"- fact number {n}" for n in range(9))))
    added = await flush_after_run(plan(fake_provider), "completed", wrote_a_file(), memory=memory)
    assert len(added) == 5 == len(memory.file("memory").entries())


@pytest.mark.parametrize(
    ("tools", "end_reason", "messages"),
    [
        ("default", "completed", wrote_a_file()),  # the memory group is off
        ("default,memory", "aborted", wrote_a_file()),  # the run did not complete
        ("default,memory", "error", wrote_a_file()),
        ("default,memory", "completed", only_read()),  # nothing changed
    ],
)
async def test_no_flush_and_no_request(
    fake_provider: FakeProviderServer,
    tmp_path: Path,
    tools: str,
    end_reason: str,
    messages: list[Message],
) -> None:
    memory = Memory(tmp_path / "memory")
    added = await flush_after_run(plan(fake_provider, tools), end_reason, messages, memory=memory)
    assert added == []
    assert fake_provider.requests == []
    assert not (tmp_path / "memory").exists()


async def test_a_slow_model_never_holds_the_cell_end(
    fake_provider: FakeProviderServer, tmp_path: Path
) -> None:
    memory = Memory(tmp_path / "memory")
    fake_provider.push(Fault("slow_first_byte", seconds=5, reply=FakeReply("- late fact")))
    started = time.monotonic()
    added = await flush_after_run(
        plan(fake_provider), "completed", wrote_a_file(), memory=memory, patience=0.3
    )
    assert added == []
    assert time.monotonic() - started < 2.0
    assert memory.file("memory").entries() == []


async def test_what_the_flush_used_is_billed_and_counted_in_the_budget(
    fake_provider: FakeProviderServer, tmp_path: Path
) -> None:
    """The flush is a model call outside the loop's events: what it used still reaches
    the session's ledger (``on_usage``, the store writer's ``bill``) and the cell's gate."""
    memory = Memory(tmp_path / "memory")
    fake_provider.push(FakeReply("- sales.csv is in USD"))
    billed: list[Usage] = []
    cell = plan(fake_provider)
    added = await flush_after_run(
        cell, "completed", wrote_a_file(), memory=memory, on_usage=billed.append
    )
    assert added == ["sales.csv is in USD"]
    assert len(billed) == 1
    assert billed[0].output > 0
    assert billed[0].input > 0
    assert cell.gate is not None
    assert cell.gate.tracker.output_tokens == billed[0].output  # counted in the budget too
