"""A tool may raise anything (issue 10, item 6): every ``BaseException`` but two becomes an
error result and the run goes on; the run's own cancellation and ``KeyboardInterrupt``
(Kernel > Interrupt) stop it, with the event grammar closed and the transcript valid.

``SystemExit`` is the ordinary case (``argparse`` in a tool exits on bad arguments); it used
to escape the loop, and from an asyncio task (a tool with a timeout runs in one) it is
re-raised out of the event loop itself. Each kind is raised from a sync tool (worker
thread) and an async tool, with and without a tool timeout, in both execution modes, and
from the hooks around a call. One case goes over real loopback HTTP into a real SQLite
store and checks the next prompt and the audit rows.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support import Recorder, check_each_run, check_grammar

from mibyan_jupyter.core import (
    Agent,
    AgentEnd,
    ScriptedModel,
    ToolMessage,
    tool,
    validate_transcript,
)
from mibyan_jupyter.core.fakes import Call, Reply
from mibyan_jupyter.core.tools import CANCELLED
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model


class LibraryAbort(BaseException):
    """A library's own BaseException subclass (gevent, trio and others have some)."""


def argparse_exit() -> None:
    parser = argparse.ArgumentParser(prog="tool", exit_on_error=True)
    parser.add_argument("--n", type=int, required=True)
    parser.parse_args(["--n", "not-a-number"])  # prints usage, raises SystemExit(2)


def raise_kind(kind: str) -> None:
    if kind == "argparse":
        argparse_exit()
    elif kind == "system_exit":
        raise SystemExit("bye")
    elif kind == "generator_exit":
        raise GeneratorExit
    elif kind == "library":
        raise LibraryAbort("custom")
    elif kind == "own_cancel":
        raise asyncio.CancelledError  # not the run's cancellation: the tool's own
    raise AssertionError(kind)


NAMES = {
    "argparse": "SystemExit",
    "system_exit": "SystemExit",
    "generator_exit": "GeneratorExit",
    "library": "LibraryAbort",
    "own_cancel": "CancelledError",
}


def hostile_tools(kind: str) -> list[Any]:
    @tool(side_effects=False)
    def sync_boom() -> str:
        """Raise from a worker thread."""
        raise_kind(kind)
        return "unreachable"

    @tool(side_effects=False)
    async def async_boom() -> str:
        """Raise on the loop."""
        await asyncio.sleep(0)
        raise_kind(kind)
        return "unreachable"

    @tool(side_effects=False)
    def fine() -> str:
        """Succeed."""
        return "fine"

    return [sync_boom, async_boom, fine]


CALLS = [Call("sync_boom", {}), Call("async_boom", {}), Call("fine", {})]


@pytest.mark.parametrize("kind", sorted(NAMES))
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
@pytest.mark.parametrize("tool_timeout", [None, 30.0])
async def test_a_base_exception_from_a_tool_is_an_error_result(
    kind: str, mode: str, tool_timeout: float | None
) -> None:
    model = ScriptedModel([Reply("", calls=CALLS), "Handled.", "Next."])
    agent = Agent(
        stream_fn=model,
        tools=hostile_tools(kind),
        tool_execution=mode,  # type: ignore[arg-type]
        loop_options={"tool_timeout": tool_timeout},
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    assert await agent.achat("go") == "Handled."
    results = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
    assert [r.name for r in results] == ["sync_boom", "async_boom", "fine"]
    for result in results[:2]:
        assert result.is_error
        assert str(result.content).startswith(NAMES[kind])
    assert results[2].content == "fine"
    assert agent.state.last_end_reason == "completed"
    assert await agent.achat("and then?") == "Next."  # the loop and the session live on
    check_each_run(recorder.events)
    validate_transcript(agent.state.messages)


async def test_argparse_says_what_happened() -> None:
    model = ScriptedModel([Reply("", calls=[Call("sync_boom", {})]), "ok"])
    agent = Agent(stream_fn=model, tools=hostile_tools("argparse"))
    await agent.achat("go")
    result = next(m for m in agent.state.messages if isinstance(m, ToolMessage))
    assert result.content == "SystemExit: 2 (the tool tried to exit the process)"


@pytest.mark.parametrize("hook", ["prepare_arguments", "before_tool_call", "after_tool_call"])
async def test_a_base_exception_from_a_hook_is_an_error_result(hook: str) -> None:
    def boom(*_: object) -> None:
        raise SystemExit(3)

    tools = hostile_tools("library")
    options: dict[str, Any] = {}
    if hook == "prepare_arguments":
        tools[2].prepare_arguments = boom
    else:
        options[hook] = boom
    model = ScriptedModel([Reply("", calls=[Call("fine", {})]), "ok", "ok again"])
    agent = Agent(stream_fn=model, tools=tools, loop_options=options)
    recorder = Recorder()
    agent.subscribe(recorder)
    assert await agent.achat("go") == "ok"
    result = next(m for m in agent.state.messages if isinstance(m, ToolMessage))
    assert result.is_error
    assert "SystemExit: 3" in str(result.content)
    assert await agent.achat("again") == "ok again"
    check_each_run(recorder.events)


def interrupting_tools() -> list[Any]:
    @tool(side_effects=False)
    def sync_interrupt() -> str:
        """Interrupted in its thread (as if SIGINT landed in code it runs)."""
        raise KeyboardInterrupt

    @tool(side_effects=False)
    async def async_interrupt() -> str:
        """Interrupted on the loop."""
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    @tool(side_effects=False)
    async def slow() -> str:
        """Runs until cancelled."""
        await asyncio.sleep(30)
        return "slow done"

    return [sync_interrupt, async_interrupt, slow]


@pytest.mark.parametrize("which", ["sync_interrupt", "async_interrupt"])
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
@pytest.mark.parametrize("tool_timeout", [None, 30.0])
async def test_keyboard_interrupt_in_a_tool_stops_the_run(
    which: str, mode: str, tool_timeout: float | None
) -> None:
    """Not a tool error: the run ends (``aborted``), every call has a result, the caller
    sees the cancellation (the cell turns it into its red "interrupted" line), and the
    next prompt of the session works."""
    # Sequential: the call after the interrupted one never starts; parallel: the slow
    # calls around it are cancelled.
    calls = [Call(which, {}), Call("slow", {})]
    if mode == "parallel":
        calls.insert(0, Call("slow", {}))
    model = ScriptedModel([Reply("", calls=calls), "After."])
    agent = Agent(
        stream_fn=model,
        tools=interrupting_tools(),
        tool_execution=mode,  # type: ignore[arg-type]
        loop_options={"tool_timeout": tool_timeout},
    )
    recorder = Recorder()
    agent.subscribe(recorder)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(agent.prompt("go"), 10)
    check_grammar(recorder.events)
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "aborted"
    results = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == [c.id for c in agent.state.messages[1].tool_calls]  # type: ignore[union-attr]
    assert all(r.content == CANCELLED for r in results)
    assert len(model.requests) == 1  # the model was not asked again
    validate_transcript(agent.state.messages)
    assert await agent.achat("again") == "After."
    check_each_run(recorder.events)


async def test_systemexit_over_real_http_into_a_real_store(
    tmp_path: Path, fake_provider: FakeProviderServer
) -> None:
    fake_provider.push(
        FakeReply(calls=[FakeCall("sync_boom"), FakeCall("async_boom"), FakeCall("fine")]),
        FakeReply("Handled."),
        FakeReply("Next."),
    )
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, "main-model"))
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    try:
        agent, info = recorded_agent(
            store,
            stream_fn=client,
            model="main",
            tools=hostile_tools("argparse"),
            loop_options={"tool_timeout": 30.0},
        )
        assert await agent.achat("go") == "Handled."
        assert await agent.achat("next") == "Next."
    finally:
        await client.aclose()
        store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name, status FROM tool_calls WHERE session_id = ? ORDER BY started_at",
            (info.id,),
        ).fetchall()
        roles = [r for (r,) in conn.execute("SELECT role FROM messages ORDER BY seq")]
    assert sorted(rows) == [("async_boom", "error"), ("fine", "done"), ("sync_boom", "error")]
    assert roles.count("tool") == 3
    assert roles[-1] == "assistant"
