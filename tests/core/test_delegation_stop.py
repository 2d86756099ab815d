"""Delegation in the core, part 2: a child's approvals (the parent's session approvals do
not carry over, "always" rules do), stopping the parent (Stop and a cancellation reach every
child at once; the partial work comes back as "stopped"), failing and hostile children
(issue 13, part 3; mibyan_jupyter/core/delegation.py). Over loopback HTTP with real Agents.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from delegation_support import (
    PARENT,
    Router,
    delegate,
    parent_agent,
    replies,
    routed,
    step,
    tool_results,
)
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    AgentEvent,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    Approved,
    BudgetLimits,
    MessageUpdate,
    tool,
)
from mibyan_jupyter.core.budget_gate import BudgetGate
from mibyan_jupyter.core.delegation import ChildRun, child_approval_gate
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import CANCELLED, current_task_id
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply
from mibyan_jupyter.testing.scripts import Fault


@pytest.fixture
def router() -> Router:
    """Each test fills in ``router.scripts``."""
    return Router({})


@pytest.fixture
async def provider(router: Router) -> AsyncIterator[tuple[FakeProviderServer, ProviderClient]]:
    async with routed(router) as both:
        yield both


@pytest.fixture
def server(provider: tuple[FakeProviderServer, ProviderClient]) -> FakeProviderServer:
    return provider[0]


@pytest.fixture
def client(provider: tuple[FakeProviderServer, ProviderClient]) -> ProviderClient:
    return provider[1]


# -- approvals ----------------------------------------------------------------------------


@dataclass
class Approver:
    """Approves for the session and records what it was asked, by whom."""

    asked: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Approved:
        self.asked.append((request.tool_name, current_task_id() or "parent"))
        return Approved(scope="session")


async def test_session_approvals_stay_with_the_parent_and_always_rules_carry_over(
    router: Router, client: ProviderClient
) -> None:
    log: list[str] = []

    @tool
    def write(path: str) -> str:
        """Write ``path``."""
        log.append(f"write {path}")
        return "written"

    @tool
    def stamp(path: str) -> str:
        """Stamp ``path``."""
        log.append(f"stamp {path}")
        return "stamped"

    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[FakeCall("write", {"path": "p"}, id="w0")]),
                FakeReply(calls=[delegate("goal-write", call_id="d1")]),
                FakeReply("done"),
            ),
            "goal-write": replies(
                FakeReply(
                    calls=[FakeCall("write", {"path": "c"}), FakeCall("stamp", {"path": "c"})]
                ),
                FakeReply(calls=[FakeCall("write", {"path": "c2"})]),
                FakeReply("child wrote"),
            ),
        }
    )
    approver = Approver()
    policy = ApprovalPolicy(always={"stamp": True})
    gate = ApprovalGate(policy=policy, approver=approver)
    parent = parent_agent(client, [write, stamp], BudgetGate(BudgetLimits()), approval=gate)
    assert await parent.achat(f"{PARENT} write") == "done"
    # the parent was asked once (then approved write for its session); the child was asked
    # again for write (the parent's session approval does not carry over) but not for stamp
    # (an "always" rule does), and only once (its own session approval holds for it)
    assert approver.asked == [("write", "parent"), ("write", "child-1")]
    assert log[0] == "write p"
    assert sorted(log[1:3]) == ["stamp c", "write c"]  # one batch: in parallel
    assert log[3:] == ["write c2"]
    assert policy.session == {"write": True}  # the child's approval did not leak back
    assert policy.always == {"stamp": True}


def test_the_child_gate_shares_rules_and_always_but_not_session() -> None:
    policy = ApprovalPolicy(always={"a": True}, session={"b": True}, side_effects_default="deny")
    parent = ApprovalGate(policy=policy, timeout=7.0)
    child = child_approval_gate(parent)
    assert child is not None
    assert child.policy is not policy
    assert child.policy.session == {}
    assert child.policy.always is policy.always
    assert child.policy.rules is policy.rules
    assert child.policy.side_effects_default == "deny"
    assert child.approver is parent.approver
    assert child.timeout == 7.0
    child.policy.remember("c", True, "always")
    assert policy.always["c"] is True  # an "always" click in a child is saved as any
    assert child_approval_gate(None) is None


# -- stopping -------------------------------------------------------------------------------


def closed_by_client(server: FakeProviderServer) -> bool:
    """Whether every connection the server still serves was closed by the client."""
    for conn in server.playback.open_connections():
        try:
            if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b"":
                return False
        except BlockingIOError:
            return False
        except OSError:
            continue
    return True


async def poll(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


STALL = Fault("stall", seconds=30.0, after_events=4, reply=FakeReply("thinking " * 200))


@pytest.mark.parametrize("how", ["abort", "cancel"])
async def test_stopping_the_parent_stops_every_child_at_once(
    router: Router, server: FakeProviderServer, client: ProviderClient, how: str
) -> None:
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(
                    calls=[delegate("goal-a", call_id="da"), delegate("goal-b", call_id="db")]
                ),
                FakeReply("unused"),
            ),
            "goal-a": replies(STALL),
            "goal-b": replies(STALL),
        }
    )
    streaming: set[str] = set()
    runs: list[ChildRun] = []

    def on_child(run: ChildRun) -> None:
        runs.append(run)

        def note(event: AgentEvent) -> None:
            if isinstance(event, MessageUpdate):
                streaming.add(run.child_id)

        run.agent.subscribe(note)

    parent = parent_agent(client, [step], BudgetGate(BudgetLimits()), on_child=on_child)
    recorder = Recorder()
    parent.subscribe(recorder)
    task = asyncio.ensure_future(parent.achat(f"{PARENT} stall"))
    await poll(lambda: streaming == {"child-1", "child-2"})
    assert len(server.playback.open_connections()) == 2
    assert not closed_by_client(server)  # both requests are still open, the server stalling
    start = time.monotonic()
    if how == "abort":
        parent.abort("Stop clicked")
        await asyncio.wait_for(task, 5)
        assert parent.state.last_end_reason == "aborted"
    else:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
    assert time.monotonic() - start < 3.0  # not the server's 30 s stall
    for run in runs:
        assert not run.agent.state.is_running
        assert run.agent.state.last_end_reason == "aborted"
        last = run.agent.state.messages[-1]
        assert getattr(last, "stop_reason", None) == "aborted"
        assert "thinking" in str(getattr(last, "content", ""))  # the partial text was kept
    await poll(lambda: closed_by_client(server))  # the server sees the requests end
    check_grammar(recorder.events)
    results = tool_results(parent)
    assert len(results) == 2
    for result in results:
        assert (result.details or {})["status"] == "stopped"
        text = str(result.content)
        assert text.startswith("Stopped before it finished")
        assert "thinking" in text  # its work so far


@pytest.mark.parametrize("when", ["at_the_call", "while_setting_up"])
async def test_a_parent_stopped_before_the_child_starts_runs_no_child(
    router: Router, client: ProviderClient, when: str
) -> None:
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-late", call_id="d1")]), FakeReply("unused")
            ),
            "goal-late": replies(FakeReply("should not run")),
        }
    )
    started: list[ChildRun] = []

    def on_child(run: ChildRun) -> None:
        started.append(run)
        if when == "while_setting_up":  # the last moment before the child's run
            parent.abort("stop")

    parent = parent_agent(client, [step], BudgetGate(BudgetLimits()), on_child=on_child)
    if when == "at_the_call":
        parent.subscribe(
            lambda e: parent.abort("stop") if e.type == "tool_execution_start" else None
        )
    await parent.achat(f"{PARENT} go")
    assert router.of("goal-late") == []  # the child never asked its model
    assert parent.state.last_end_reason == "aborted"
    [result] = tool_results(parent)
    assert result.content == CANCELLED  # the batch's word for a call the abort cut short
    assert len(started) == (1 if when == "while_setting_up" else 0)
    for run in started:
        assert run.agent.state.messages == []


# -- failures and hostile replies -------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault("cut_mid_event"), Fault("status", status=400, message="bad child"), Fault("reset")],
    ids=["cut", "status", "reset"],
)
async def test_a_failing_child_is_one_error_line_and_the_parent_goes_on(
    router: Router, client: ProviderClient, fault: Fault
) -> None:
    router.scripts.update(
        {
            PARENT: replies(FakeReply(calls=[delegate("goal-bad", call_id="d1")]), FakeReply("ok")),
            "goal-bad": replies(fault),
        }
    )
    parent = parent_agent(client, [step], BudgetGate(BudgetLimits()))
    assert await parent.achat(f"{PARENT} go") == "ok"
    [result] = tool_results(parent)
    assert result.is_error
    assert (result.details or {})["status"] == "failed"
    text = str(result.content)
    assert text.startswith("The sub-agent failed: ")
    assert "\n" not in text


async def test_huge_and_broken_output_of_a_child_does_not_break_the_parent(
    router: Router, client: ProviderClient
) -> None:
    @tool(side_effects=False)
    def flood() -> str:
        """Return a lot."""
        return "x" * 2_000_000

    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-flood", call_id="d1")]), FakeReply("ok")
            ),
            "goal-flood": replies(
                FakeReply(calls=[FakeCall("flood", {})]),
                Fault("invalid_json_args", tool="flood"),
                FakeReply("\ud83d half a pair and " + "y" * 100_000),
            ),
        }
    )
    parent = parent_agent(client, [flood], BudgetGate(BudgetLimits()))
    assert await parent.achat(f"{PARENT} flood") == "ok"
    [result] = tool_results(parent)
    assert (result.details or {})["status"] == "completed"
    child_requests = router.of("goal-flood")
    assert all(len(r.raw) < 200_000 for r in child_requests)  # the child spilled its flood
    parent_last = router.of(PARENT)[-1]
    assert len(parent_last.raw) < 100_000  # and the parent spilled the child's long answer


async def test_a_failing_on_child_runs_no_child_and_cleanups_run_after_the_child(
    router: Router, client: ProviderClient
) -> None:
    router.scripts.update(
        {
            PARENT: replies(
                FakeReply(calls=[delegate("goal-x", call_id="d1")]),
                FakeReply(calls=[delegate("goal-y", call_id="d2")]),
                FakeReply("ok"),
            ),
            "goal-x": replies(FakeReply("x done")),
            "goal-y": replies(FakeReply("y done")),
        }
    )
    cleaned: list[str] = []

    def on_child(run: ChildRun) -> Callable[[], None]:
        if run.goal == "goal-x":
            raise RuntimeError("the store is gone")
        return lambda: cleaned.append(f"{run.child_id} {run.agent.state.last_end_reason}")

    parent = parent_agent(client, [step], BudgetGate(BudgetLimits()), on_child=on_child)
    assert await parent.achat(f"{PARENT} go") == "ok"
    failed, worked = tool_results(parent)
    assert failed.is_error
    assert "could not be started: RuntimeError: the store is gone" in str(failed.content)
    assert router.of("goal-x") == []
    assert str(worked.content).startswith("y done")
    assert cleaned == ["child-2 completed"]
