"""Approval: the pure policy, the gate with an approver (override args, denial, scopes,
timeout), the shipped approvers, and where the approval events sit in the stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentEnd,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalRule,
    Approved,
    AutoApprove,
    Call,
    Decision,
    Denied,
    DenyAll,
    PolicyOnly,
    Reply,
    ScriptedModel,
    Tool,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolMessage,
    tool,
)

# -- the pure policy ------------------------------------------------------------------------


def test_default_by_side_effects() -> None:
    policy = ApprovalPolicy()
    asked = policy.decide("write", {}, side_effects=True)
    assert (asked.action, asked.source) == ("ask", "default")
    assert "side effects" in asked.reason
    read = policy.decide("read", {}, side_effects=False)
    assert (read.action, read.source) == ("allow", "default")
    custom = ApprovalPolicy(side_effects_default="deny", read_only_default="ask")
    assert custom.decide("write", {}, side_effects=True).action == "deny"
    assert custom.decide("read", {}, side_effects=False).action == "ask"


def test_deny_rules_come_first() -> None:
    policy = ApprovalPolicy(
        rules=[
            ApprovalRule("shell", "allow"),
            ApprovalRule("shell", "deny", args={"cmd": "*rm -rf*"}, reason="destructive"),
        ],
        always={"shell": True},
        session={"shell": True},
    )
    denied = policy.decide("shell", {"cmd": "sudo rm -rf /"}, side_effects=True)
    assert (denied.action, denied.source, denied.reason) == ("deny", "rule", "destructive")
    # without the dangerous argument, the remembered approval applies
    allowed = policy.decide("shell", {"cmd": "ls"}, side_effects=True)
    assert (allowed.action, allowed.source) == ("allow", "always")


def test_a_deny_rule_without_a_reason_names_the_rule() -> None:
    policy = ApprovalPolicy(rules=[ApprovalRule("net_*", "deny")])
    decision = policy.decide("net_fetch", {}, side_effects=False)
    assert decision.action == "deny"
    assert "net_*" in decision.reason


def test_remembered_decisions_before_other_rules_always_before_session() -> None:
    policy = ApprovalPolicy(rules=[ApprovalRule("*", "ask")])
    assert policy.decide("edit", {}, side_effects=True).action == "ask"
    policy.session["edit"] = False
    session = policy.decide("edit", {}, side_effects=True)
    assert (session.action, session.source) == ("deny", "session")
    assert "for this session" in session.reason
    policy.always["edit"] = True  # "always" outranks "session"
    always = policy.decide("edit", {}, side_effects=True)
    assert (always.action, always.source) == ("allow", "always")
    assert "always" in always.reason
    # other tools are not affected
    assert policy.decide("other", {}, side_effects=True).action == "ask"


def test_first_matching_rule_with_argument_globs() -> None:
    policy = ApprovalPolicy(
        rules=[
            ApprovalRule("run_*", "ask", args={"path": "/etc/*"}, reason="system files"),
            ApprovalRule("run_*", "allow", args={"n": "4*"}),
            ApprovalRule("run_*", "allow"),
            ApprovalRule("run_script", "ask"),  # never reached: an earlier rule matches
        ]
    )
    etc = policy.decide("run_script", {"path": "/etc/passwd"}, side_effects=True)
    assert (etc.action, etc.reason, etc.source) == ("ask", "system files", "rule")
    # argument globs match the string form; a missing argument does not match
    assert policy.decide("run_x", {"n": 42}, side_effects=True).action == "allow"
    assert policy.decide("run_script", {"path": "/home/x"}, side_effects=True).action == "allow"
    # no rule matches: the default
    assert policy.decide("other", {"path": "/etc/x"}, side_effects=True).action == "ask"
    assert policy.decide("other", {}, side_effects=False).action == "allow"


def test_rule_matching_is_case_sensitive_and_needs_every_argument() -> None:
    rule = ApprovalRule("Write", "deny", args={"path": "*.py", "mode": "w"})
    assert rule.matches("Write", {"path": "a.py", "mode": "w"})
    assert not rule.matches("write", {"path": "a.py", "mode": "w"})
    assert not rule.matches("Write", {"path": "a.py"})
    assert not rule.matches("Write", {"path": "a.txt", "mode": "w"})


def test_remember_by_scope_and_on_always() -> None:
    persisted: list[tuple[str, bool]] = []
    policy = ApprovalPolicy(on_always=lambda name, ok: persisted.append((name, ok)))
    policy.remember("a", True, "once")
    assert policy.session == {}
    assert policy.always == {}
    policy.remember("b", False, "session")
    assert policy.session == {"b": False}
    policy.remember("c", True, "always")
    assert policy.always == {"c": True}
    assert persisted == [("c", True)]
    policy.reset()
    assert policy.session == {}
    assert policy.always == {}


def test_set_decision_replaces_both_scopes_and_does_not_persist() -> None:
    """What ``%agent policy set`` uses: the caller persists once for every session."""
    persisted: list[tuple[str, bool]] = []
    policy = ApprovalPolicy(on_always=lambda name, ok: persisted.append((name, ok)))
    policy.remember("edit", False, "session")
    policy.set_decision("edit", "allow", "always")
    assert policy.remembered("always") == {"edit": True}
    assert policy.remembered("session") == {}
    assert policy.decide("edit", {}, side_effects=True).action == "allow"
    policy.set_decision("edit", "deny", "session")
    assert policy.remembered("session") == {"edit": False}
    assert policy.remembered("always") == {}
    policy.set_decision("edit", "ask")
    assert policy.remembered("session") == policy.remembered("always") == {}
    assert policy.decide("edit", {}, side_effects=True).action == "ask"
    assert persisted == []


def test_reset_one_tool_keeps_the_others_and_remembered_is_a_copy() -> None:
    policy = ApprovalPolicy()
    policy.remember("a", True, "session")
    policy.remember("a", True, "always")
    policy.remember("b", False, "always")
    policy.reset("a")
    assert policy.remembered("session") == {}
    assert policy.remembered("always") == {"b": False}
    policy.remembered("always")["c"] = True
    assert policy.always == {"b": False}
    policy.reset("nothing-remembered")  # forgetting an unknown tool is fine
    assert policy.always == {"b": False}


# -- the gate on its own --------------------------------------------------------------------


async def check(
    gate: ApprovalGate, name: str = "write", args: Mapping[str, Any] | None = None
) -> tuple[Any, list[Any]]:
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    outcome = await gate.check(
        "c1", name, args or {}, side_effects=True, emit=emit, signal=AbortSignal()
    )
    return outcome, events


async def test_gate_policy_decisions_do_not_reach_the_approver() -> None:
    class Fail:
        async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
            raise AssertionError("asked")

    gate = ApprovalGate(
        ApprovalPolicy(
            rules=[ApprovalRule("write", "allow"), ApprovalRule("rm", "deny", reason="no")]
        ),
        Fail(),
    )
    outcome, events = await check(gate, "write")
    assert outcome.approved
    assert [(e.type, e.decided_by) for e in events] == [("approval_resolved", "policy")]
    outcome, events = await check(gate, "rm")
    assert not outcome.approved
    assert outcome.reason == "no"
    assert [(e.approved, e.decided_by, e.reason) for e in events] == [(False, "policy", "no")]


async def test_gate_timeout_counts_as_a_denial() -> None:
    async def never(request: ApprovalRequest, signal: AbortSignal) -> Decision:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    gate = ApprovalGate(approver=never, timeout=0.05)
    began = time.monotonic()
    outcome, events = await check(gate)
    assert time.monotonic() - began < 0.5
    assert not outcome.approved
    assert "0.05" in (outcome.reason or "")
    assert [e.type for e in events] == ["approval_requested", "approval_resolved"]
    assert events[1].decided_by == "timeout"
    assert not events[1].approved
    assert gate.policy.session == {}  # a timeout is not remembered
    assert gate.policy.always == {}


# -- the gate in the loop -------------------------------------------------------------------


class Approver:
    """Answers from a list and records every request."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        self.requests.append(request)
        return self.answers.pop(0)


def writer(log: list[str]) -> Tool:
    @tool
    def write(path: str, text: str = "") -> str:
        """Write ``text`` to ``path``.

        Args:
            path: where to write.
            text: what to write.
        """
        log.append(path)
        return f"wrote {path}"

    return write


def run_agent(
    replies: list[Reply | str], tools: list[Tool], gate: ApprovalGate
) -> tuple[Agent, ScriptedModel, Recorder]:
    model = ScriptedModel(replies)
    agent = Agent(stream_fn=model, tools=tools, approval=gate)
    recorder = Recorder()
    agent.subscribe(recorder)
    return agent, model, recorder


def write_call(path: str, call_id: str) -> Reply:
    return Reply(calls=[Call("write", {"path": path}, id=call_id)])


def results(recorder: Recorder) -> dict[str, ToolMessage]:
    return {e.call_id: e.result for e in recorder.of(ToolExecutionEnd)}


def assert_approval_inside_execution(recorder: Recorder) -> None:
    """Each approval event sits between its call's ToolExecutionStart and End."""
    events = recorder.events
    for index, event in enumerate(events):
        if isinstance(event, ApprovalRequested | ApprovalResolved):
            start = next(
                i
                for i, e in enumerate(events)
                if isinstance(e, ToolExecutionStart) and e.call_id == event.call_id
            )
            end = next(
                i
                for i, e in enumerate(events)
                if isinstance(e, ToolExecutionEnd) and e.call_id == event.call_id
            )
            assert start < index < end


async def test_approved_with_override_args_replaces_the_arguments() -> None:
    written: list[str] = []
    approver = Approver(Approved(override_args={"path": "safe.txt"}))
    agent, _, recorder = run_agent(
        [write_call("/etc/passwd", "w1"), "done"],
        [writer(written)],
        ApprovalGate(approver=approver),
    )
    await agent.prompt("write it")
    check_grammar(recorder.events)
    assert written == ["safe.txt"]
    assert results(recorder)["w1"].content == "wrote safe.txt"
    assert approver.requests[0].args == {"path": "/etc/passwd", "text": ""}
    assert approver.requests[0].tool_name == "write"
    assert approver.requests[0].call_id == "w1"
    # the execution start shows what the model asked for
    assert recorder.of(ToolExecutionStart)[0].args == {"path": "/etc/passwd"}
    assert_approval_inside_execution(recorder)


async def test_override_args_are_validated_again() -> None:
    written: list[str] = []
    approver = Approver(Approved(override_args={"path": 123, "bogus": True}))
    agent, _, recorder = run_agent(
        [write_call("a.txt", "w1"), "done"], [writer(written)], ApprovalGate(approver=approver)
    )
    await agent.prompt("write it")
    check_grammar(recorder.events)
    assert written == []
    result = results(recorder)["w1"]
    assert result.is_error
    assert "path" in str(result.content)
    assert "bogus" in str(result.content)


async def test_denied_reason_reaches_the_model_with_do_not_retry() -> None:
    written: list[str] = []
    approver = Approver(Denied("too risky"))
    agent, model, recorder = run_agent(
        [write_call("a.txt", "w1"), "understood"],
        [writer(written)],
        ApprovalGate(approver=approver),
    )
    await agent.prompt("write it")
    check_grammar(recorder.events)
    assert written == []
    result = results(recorder)["w1"]
    assert result.is_error
    assert "too risky" in str(result.content)
    assert "not retry the same call" in str(result.content)
    resolved = recorder.of(ApprovalResolved)
    assert [(r.approved, r.decided_by, r.reason) for r in resolved] == [
        (False, "user", "too risky")
    ]
    # the model saw the denial as the tool result
    assert model.requests[1].messages[-1] == result
    assert_approval_inside_execution(recorder)


async def test_denied_without_a_reason_still_explains() -> None:
    approver = Approver(Denied())
    agent, _, recorder = run_agent(
        [write_call("a.txt", "w1"), "ok"], [writer([])], ApprovalGate(approver=approver)
    )
    await agent.prompt("write it")
    check_grammar(recorder.events)
    content = str(results(recorder)["w1"].content)
    assert "denied" in content
    assert "not retry" in content


@pytest.mark.parametrize(
    ("scope", "asked"),
    [("once", 3), ("session", 1), ("always", 1)],
)
async def test_approval_scopes(scope: str, asked: int) -> None:
    written: list[str] = []
    persisted: list[tuple[str, bool]] = []
    approver = Approver(*(Approved(scope=scope) for _ in range(3)))  # type: ignore[arg-type]
    gate = ApprovalGate(
        ApprovalPolicy(on_always=lambda name, ok: persisted.append((name, ok))), approver
    )
    agent, model, recorder = run_agent(
        [write_call("a", "w1"), write_call("b", "w2"), "first done"], [writer(written)], gate
    )
    await agent.prompt("two writes")
    model.add(write_call("c", "w3"), "second done")
    await agent.prompt("one more")  # a second prompt on the same agent
    check_each_run(recorder.events)
    assert len(recorder.of(AgentEnd)) == 2
    assert written == ["a", "b", "c"]
    assert len(approver.requests) == asked
    assert [e.call_id for e in recorder.of(ApprovalRequested)] == ["w1", "w2", "w3"][:asked]
    resolved = recorder.of(ApprovalResolved)
    assert [e.call_id for e in resolved] == ["w1", "w2", "w3"]
    assert all(e.approved for e in resolved)
    assert [e.decided_by for e in resolved] == ["user"] * asked + ["rule"] * (3 - asked)
    assert resolved[0].scope == scope
    assert persisted == ([("write", True)] if scope == "always" else [])
    assert gate.policy.session == ({"write": True} if scope == "session" else {})
    assert gate.policy.always == ({"write": True} if scope == "always" else {})
    assert_approval_inside_execution(recorder)


async def test_session_denial_is_not_asked_again() -> None:
    written: list[str] = []
    approver = Approver(Denied("not today", scope="session"))
    agent, _, recorder = run_agent(
        [write_call("a", "w1"), write_call("b", "w2"), "ok"],
        [writer(written)],
        ApprovalGate(approver=approver),
    )
    await agent.prompt("write twice")
    check_grammar(recorder.events)
    assert written == []
    assert len(approver.requests) == 1
    second = results(recorder)["w2"]
    assert second.is_error
    assert "for this session" in str(second.content)
    resolved = recorder.of(ApprovalResolved)
    assert [(r.call_id, r.decided_by) for r in resolved] == [("w1", "user"), ("w2", "rule")]


async def test_approval_timeout_in_the_loop() -> None:
    written: list[str] = []

    async def never(request: ApprovalRequest, signal: AbortSignal) -> Decision:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent, _, recorder = run_agent(
        [write_call("a", "w1"), "gave up"],
        [writer(written)],
        ApprovalGate(approver=never, timeout=0.05),
    )
    began = time.monotonic()
    assert await agent.achat("write") == "gave up"
    assert time.monotonic() - began < 1.0
    check_grammar(recorder.events)
    assert written == []
    resolved = recorder.of(ApprovalResolved)
    assert len(resolved) == 1
    assert resolved[0].decided_by == "timeout"
    assert not resolved[0].approved
    result = results(recorder)["w1"]
    assert result.is_error
    assert "no answer within 0.05 s" in str(result.content)
    assert "not retry" in str(result.content)
    assert_approval_inside_execution(recorder)


async def test_auto_approve() -> None:
    written: list[str] = []
    agent, _, recorder = run_agent(
        [write_call("a", "w1"), "ok"], [writer(written)], ApprovalGate(approver=AutoApprove())
    )
    await agent.prompt("write")
    check_grammar(recorder.events)
    assert written == ["a"]
    assert [e.type for e in recorder.events if e.type.startswith("approval")] == [
        "approval_requested",
        "approval_resolved",
    ]
    assert recorder.of(ApprovalResolved)[0].approved
    assert_approval_inside_execution(recorder)


async def test_deny_all() -> None:
    written: list[str] = []
    agent, _, recorder = run_agent(
        [write_call("a", "w1"), "ok"],
        [writer(written)],
        ApprovalGate(approver=DenyAll("nobody home")),
    )
    await agent.prompt("write")
    check_grammar(recorder.events)
    assert written == []
    assert "nobody home" in str(results(recorder)["w1"].content)


async def test_policy_only_denies_what_needs_asking_and_follows_rules() -> None:
    written: list[str] = []

    @tool(side_effects=True)
    def append(path: str) -> str:
        """Append to a file."""
        written.append(f"append {path}")
        return "appended"

    gate = ApprovalGate(ApprovalPolicy(rules=[ApprovalRule("append", "allow")]), PolicyOnly())
    model_replies: list[Reply | str] = [
        Reply(
            calls=[Call("write", {"path": "x"}, id="w1"), Call("append", {"path": "y"}, id="a1")]
        ),
        "ok",
    ]
    agent, _, recorder = run_agent(model_replies, [writer(written), append], gate)
    await agent.prompt("both")
    check_grammar(recorder.events)
    assert written == ["append y"]
    denied = results(recorder)["w1"]
    assert denied.is_error
    assert "needs approval" in str(denied.content)
    assert "no one can be asked" in str(denied.content)
    assert not results(recorder)["a1"].is_error
    assert_approval_inside_execution(recorder)


async def test_read_only_tools_run_without_asking() -> None:
    class Fail:
        async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
            raise AssertionError("a read-only tool was sent for approval")

    @tool(side_effects=False)
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    agent, _, recorder = run_agent(
        [Reply(calls=[Call("read", {"path": "a"}, id="r1")]), "ok"],
        [read],
        ApprovalGate(approver=Fail()),
    )
    await agent.prompt("read")
    check_grammar(recorder.events)
    assert results(recorder)["r1"].content == "contents of a"
    assert not recorder.of(ApprovalRequested)
    assert not recorder.of(ApprovalResolved)


async def test_approvals_in_a_parallel_batch_are_asked_at_once_and_keep_call_order() -> None:
    written: list[str] = []
    order: list[str] = []

    class Slow:
        async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
            order.append(f"ask {request.call_id}")
            await asyncio.sleep(0.01)
            order.append(f"answer {request.call_id}")
            if request.call_id == "w2":
                return Denied("not that one")
            return Approved()

    agent, _, recorder = run_agent(
        [
            Reply(
                calls=[
                    Call("write", {"path": "a"}, id="w1"),
                    Call("write", {"path": "b"}, id="w2"),
                    Call("write", {"path": "c"}, id="w3"),
                ]
            ),
            "ok",
        ],
        [writer(written)],
        ApprovalGate(approver=Slow()),
    )
    added = await agent.prompt("three")
    check_grammar(recorder.events)
    assert order == ["ask w1", "ask w2", "ask w3", "answer w1", "answer w2", "answer w3"]
    assert sorted(written) == ["a", "c"]
    tool_messages = [m for m in added if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == ["w1", "w2", "w3"]
    assert [m.is_error for m in tool_messages] == [False, True, False]
    assert_approval_inside_execution(recorder)


async def test_an_approver_that_raises_resolves_the_request_as_a_denial() -> None:
    """A broken approver (say, a widget whose front end went away) must not leave the
    approval pending in the event stream; the call fails with an error result."""
    written: list[str] = []

    class Broken:
        async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
            raise RuntimeError("the front end went away")

    agent, _, recorder = run_agent(
        [write_call("a", "w1"), "ok"], [writer(written)], ApprovalGate(approver=Broken())
    )
    await agent.prompt("write")
    assert written == []
    result = results(recorder)["w1"]
    assert result.is_error
    assert "the front end went away" in str(result.content)
    assert [e.call_id for e in recorder.of(ApprovalRequested)] == ["w1"]
    resolved = recorder.of(ApprovalResolved)
    assert [(e.call_id, e.approved) for e in resolved] == [("w1", False)]
    check_grammar(recorder.events)
    assert_approval_inside_execution(recorder)
