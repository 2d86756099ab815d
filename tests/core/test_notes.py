"""Ephemeral notes (issue 10, item 2): on the request and a NoteNotice, never stored."""

from __future__ import annotations

from mibyan_jupyter.core import Agent, BudgetLimits, ModelRequest
from mibyan_jupyter.core.compaction import CompactionSettings
from mibyan_jupyter.core.fakes import Call, FunctionModel, Reply
from mibyan_jupyter.core.notes import NoteContext
from mibyan_jupyter.core.notices import NoteNotice
from mibyan_jupyter.core.tools import tool


@tool(side_effects=False)
def step() -> str:
    """One step."""
    return "ok"


def recording(replies: list[Reply | str]) -> tuple[FunctionModel, list[ModelRequest]]:
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Reply | str:
        requests.append(request)
        return replies[len(requests) - 1]

    return FunctionModel(reply), requests


async def test_caller_notes_go_on_each_request_and_never_in_the_transcript() -> None:
    seen: list[NoteContext] = []

    async def notes(context: NoteContext) -> list[str]:
        seen.append(context)
        return ["df: DataFrame (10, 3)"]

    model, requests = recording([Reply(calls=[Call("step")]), "done"])
    agent = Agent(stream_fn=model, tools=[step], notes=notes)
    events: list[object] = []
    agent.subscribe(events.append)
    await agent.achat("go")
    assert [r.notes for r in requests] == [("df: DataFrame (10, 3)",)] * 2
    assert len([e for e in events if isinstance(e, NoteNotice)]) == 2
    assert not any("DataFrame" in str(m.content) for m in agent.state.messages)
    assert all(r.system_prompt == "" for r in requests)
    assert len(seen) == 2
    assert seen[0].window is None


async def test_budget_warnings_once_per_threshold() -> None:
    replies: list[Reply | str] = [Reply(calls=[Call("step")]) for _ in range(9)] + ["done"]
    model, requests = recording(replies)
    agent = Agent(stream_fn=model, tools=[step], budget=BudgetLimits(max_turns=10))
    await agent.achat("go")
    warned = [(i, n) for i, r in enumerate(requests) for n in r.notes]
    assert [i for i, _ in warned] == [7, 9]  # 7 of 10 turns used, then 9 of 10
    assert "70 %" in warned[0][1]
    assert "90 %" in warned[1][1]


async def test_context_pressure_note_and_a_failing_notes_fn_is_skipped() -> None:
    def broken(context: NoteContext) -> list[str]:
        raise RuntimeError("no kernel")

    model, requests = recording(["done"])
    agent = Agent(
        stream_fn=model,
        notes=broken,
        compaction=CompactionSettings(window=100, mode="off"),
    )
    await agent.achat("x " * 200)
    [note] = requests[0].notes
    assert note.startswith("[context]")
    assert "of your context window" in note
