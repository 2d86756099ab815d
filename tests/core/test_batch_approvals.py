"""Batch approvals (issue 11, part 1): every call of a batch that needs approval is asked
at once and may be decided in any order; parallel calls run as their decisions arrive,
sequential tools still run one at a time in call order, results stay in call order, and a
Stop while questions are open resolves every one of them. Over real loopback HTTP (the
fake provider server) into a real SQLite store where the audit matters."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentEnd,
    ApprovalGate,
    ApprovalRequest,
    ApprovalRequested,
    ApprovalResolved,
    Approved,
    Decision,
    Denied,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolMessage,
    tool,
)
from mibyan_jupyter.core.tools import CANCELLED, Tool
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model


class Panel:
    """An approver a test answers by hand, as a person clicks cards: each question waits
    until :meth:`decide` is called for its call id."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.cancelled: list[str] = []
        self._answers: dict[str, asyncio.Future[Decision]] = {}

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        future = self._future(request.call_id)
        self.asked.append(request.call_id)
        try:
            return await future
        except asyncio.CancelledError:
            self.cancelled.append(request.call_id)
            raise

    def _future(self, call_id: str) -> asyncio.Future[Decision]:
        if call_id not in self._answers:
            self._answers[call_id] = asyncio.get_running_loop().create_future()
        return self._answers[call_id]

    def decide(self, call_id: str, decision: Decision) -> None:
        self._future(call_id).set_result(decision)

    async def until_asked(self, count: int, seconds: float = 5.0) -> None:
        deadline = time.monotonic() + seconds
        while len(self.asked) < count:
            assert time.monotonic() < deadline, f"asked only {self.asked}"
            await asyncio.sleep(0.005)


def writers(log: list[str], *, sequential: bool = False) -> list[Tool]:
    @tool(sequential=sequential)
    async def write(path: str) -> str:
        """Write a file.

        Args:
            path: where.
        """
        log.append(f"begin {path}")
        await asyncio.sleep(0.02)
        log.append(f"end {path}")
        return f"wrote {path}"

    @tool(side_effects=False)
    def look(path: str) -> str:
        """Read a file.

        Args:
            path: what.
        """
        log.append(f"look {path}")
        return f"saw {path}"

    return [write, look]


def three_writes(server: FakeProviderServer, *extra: FakeCall) -> None:
    calls = [FakeCall("write", {"path": p}, id=f"w{i}") for i, p in enumerate("abc", 1)]
    server.push(FakeReply(calls=[*calls, *extra]), FakeReply("All done."), FakeReply("Again."))


def agent_over(server: FakeProviderServer, tools: Sequence[Tool], panel: Panel) -> Agent:
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(server, "main-model"))
    return Agent(
        stream_fn=client, model="main", tools=list(tools), approval=ApprovalGate(approver=panel)
    )


def results(messages: Sequence[object]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


async def test_parallel_calls_are_asked_at_once_and_run_as_decided(
    fake_provider: FakeProviderServer,
) -> None:
    log: list[str] = []
    panel = Panel()
    three_writes(fake_provider, FakeCall("look", {"path": "x"}, id="r1"))
    agent = agent_over(fake_provider, writers(log), panel)
    recorder = Recorder()
    agent.subscribe(recorder)
    run = asyncio.ensure_future(agent.prompt("three writes and a look"))
    await panel.until_asked(3)
    assert panel.asked == ["w1", "w2", "w3"]  # all three open together
    assert [e.call_id for e in recorder.of(ApprovalRequested)] == ["w1", "w2", "w3"]
    assert not recorder.of(ApprovalResolved)
    assert log == ["look x"]  # a call nobody is asked about does not wait for the others
    panel.decide("w3", Approved())
    await asyncio.sleep(0.1)
    assert log == ["look x", "begin c", "end c"]  # runs as soon as it is approved
    panel.decide("w2", Denied("not b"))
    panel.decide("w1", Approved())
    added = await asyncio.wait_for(run, 10)
    check_grammar(recorder.events)
    assert log[3:] == ["begin a", "end a"]
    tool_results = results(added)
    assert [m.tool_call_id for m in tool_results] == ["w1", "w2", "w3", "r1"]  # call order
    assert [m.is_error for m in tool_results] == [False, True, False, False]
    assert "not b" in str(tool_results[1].content)
    resolved = recorder.of(ApprovalResolved)
    assert [(e.call_id, e.approved) for e in resolved] == [
        ("w3", True),
        ("w2", False),
        ("w1", True),
    ]
    assert [e.call_id for e in recorder.of(ToolExecutionEnd)][-1] == "w1"  # completion order
    # the model saw the results in call order
    body = fake_provider.requests[-1].body
    assert isinstance(body, dict)
    last = body["messages"]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ["w1", "w2", "w3", "r1"]


async def test_sequential_calls_are_asked_at_once_but_run_one_at_a_time_in_call_order(
    fake_provider: FakeProviderServer,
) -> None:
    log: list[str] = []
    panel = Panel()
    three_writes(fake_provider)
    agent = agent_over(fake_provider, writers(log, sequential=True), panel)
    recorder = Recorder()
    agent.subscribe(recorder)
    run = asyncio.ensure_future(agent.prompt("three writes"))
    await panel.until_asked(3)
    assert panel.asked == ["w1", "w2", "w3"]
    panel.decide("w3", Approved())
    panel.decide("w2", Approved())
    await asyncio.sleep(0.1)
    assert log == []  # w3 and w2 are decided, but w1 comes first
    panel.decide("w1", Approved())
    added = await asyncio.wait_for(run, 10)
    check_grammar(recorder.events)
    assert log == ["begin a", "end a", "begin b", "end b", "begin c", "end c"]
    assert [m.tool_call_id for m in results(added)] == ["w1", "w2", "w3"]
    assert [e.call_id for e in recorder.of(ToolExecutionEnd)] == ["w1", "w2", "w3"]


async def test_a_sequential_batch_starts_calls_nobody_is_asked_about_in_their_turn(
    fake_provider: FakeProviderServer,
) -> None:
    log: list[str] = []
    panel = Panel()
    fake_provider.push(
        FakeReply(
            calls=[
                FakeCall("look", {"path": "x"}, id="r1"),
                FakeCall("write", {"path": "a"}, id="w1"),
                FakeCall("look", {"path": "y"}, id="r2"),
            ]
        ),
        FakeReply("Done."),
    )
    agent = agent_over(fake_provider, writers(log, sequential=True), panel)
    recorder = Recorder()
    agent.subscribe(recorder)
    run = asyncio.ensure_future(agent.prompt("go"))
    await panel.until_asked(1)
    await asyncio.sleep(0.05)
    assert [e.call_id for e in recorder.of(ToolExecutionStart)] == ["w1", "r1"]
    assert log == ["look x"]  # r1 ran; r2 waits behind w1
    panel.decide("w1", Approved())
    await asyncio.wait_for(run, 10)
    check_grammar(recorder.events)
    assert log == ["look x", "begin a", "end a", "look y"]
    assert [e.call_id for e in recorder.of(ToolExecutionStart)] == ["w1", "r1", "r2"]


@pytest.mark.parametrize("sequential", [False, True])
async def test_stop_while_questions_are_open_resolves_every_one(
    fake_provider: FakeProviderServer, sequential: bool
) -> None:
    log: list[str] = []
    panel = Panel()
    three_writes(fake_provider)
    agent = agent_over(fake_provider, writers(log, sequential=sequential), panel)
    recorder = Recorder()
    agent.subscribe(recorder)
    run = asyncio.ensure_future(agent.prompt("three writes"))
    await panel.until_asked(3)
    if sequential:
        panel.decide("w2", Approved())  # decided, but waits for w1
    await asyncio.sleep(0.02)
    began = time.monotonic()
    agent.abort()
    await asyncio.wait_for(run, 5)
    assert time.monotonic() - began < 1.0
    check_grammar(recorder.events)
    assert log == []
    resolved = {e.call_id: e for e in recorder.of(ApprovalResolved)}
    assert set(resolved) == {"w1", "w2", "w3"}
    open_ones = ["w1", "w3"] if sequential else ["w1", "w2", "w3"]
    assert all(resolved[c].decided_by == "abort" for c in open_ones)
    assert sorted(panel.cancelled) == open_ones
    tool_results = results(agent.state.messages)
    assert [m.tool_call_id for m in tool_results] == ["w1", "w2", "w3"]
    assert all(m.content == CANCELLED for m in tool_results)
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "aborted"


async def test_a_decision_for_the_session_settles_the_other_open_questions(
    fake_provider: FakeProviderServer,
) -> None:
    log: list[str] = []
    panel = Panel()
    three_writes(fake_provider)
    agent = agent_over(fake_provider, writers(log), panel)
    recorder = Recorder()
    agent.subscribe(recorder)
    run = asyncio.ensure_future(agent.prompt("three writes"))
    await panel.until_asked(3)
    panel.decide("w2", Approved(scope="session"))
    await asyncio.wait_for(run, 10)
    check_grammar(recorder.events)
    assert sorted(x for x in log if x.startswith("end")) == ["end a", "end b", "end c"]
    resolved = {e.call_id: e for e in recorder.of(ApprovalResolved)}
    assert resolved["w2"].decided_by == "user"
    for other in ("w1", "w3"):
        assert resolved[other].approved
        assert resolved[other].decided_by == "rule"  # the remembered decision matched
        assert resolved[other].reason == "the user approved write for this session"
    assert sorted(panel.cancelled) == ["w1", "w3"]  # their cards are not left waiting


async def test_decisions_in_reverse_order_are_audited_per_call_in_a_real_store(
    tmp_path: Path, fake_provider: FakeProviderServer
) -> None:
    log: list[str] = []
    panel = Panel()
    three_writes(fake_provider)
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, "main-model"))
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    try:
        agent, info = recorded_agent(
            store,
            stream_fn=client,
            model="main",
            tools=writers(log),
            approval=ApprovalGate(approver=panel),
        )
        run = asyncio.ensure_future(agent.achat("go"))
        await panel.until_asked(3)
        panel.decide("w3", Approved())
        panel.decide("w2", Denied("no"))
        panel.decide("w1", Approved(scope="once"))
        assert await asyncio.wait_for(run, 10) == "All done."
    finally:
        await client.aclose()
        store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT call_id, status, decision, decided_by, requested_at, decided_at"
            " FROM tool_calls WHERE session_id = ? ORDER BY call_id",
            (info.id,),
        ).fetchall()
        tools = [
            r
            for (r,) in conn.execute(
                "SELECT tool_call_id FROM messages WHERE role = 'tool' ORDER BY seq"
            )
        ]
    assert [row[:4] for row in rows] == [
        ("w1", "done", "approved", "user"),
        ("w2", "error", "denied", "user"),
        ("w3", "done", "approved", "user"),
    ]
    requested = [row[4] for row in rows]
    decided = [row[5] for row in rows]
    assert max(requested) < min(decided)  # all three asked before any was decided
    assert decided[2] <= decided[1] <= decided[0]  # decided in reverse order
    assert tools == ["w1", "w2", "w3"]
