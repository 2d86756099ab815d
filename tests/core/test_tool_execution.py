"""Tool execution inside the loop: parallel and sequential batches, preparation failures,
hooks, updates, timeouts and return values (issue 2, "Tests that must exist").

Every run is checked against the event grammar, and where order matters the exact event
sequence is asserted, both as event types and as a per-call trace
(``start:<id>``, ``update:<id>``, ``end:<id>``, ``result:<id>``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    AfterToolCall,
    Agent,
    AgentContext,
    AgentEvent,
    BeforeToolCall,
    Block,
    LoopConfig,
    MessageStart,
    ResultOverride,
    ScriptedModel,
    Tool,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolMessage,
    ToolResult,
    TurnEnd,
    UserMessage,
    run_agent_loop,
    tool,
)
from mibyan_jupyter.core.fakes import Call, Reply

# -- helpers ---------------------------------------------------------------------------------

HEAD = [
    "agent_start",
    "turn_start",
    "message_start",  # the prompt
    "message_end",
    "message_start",  # the assistant message with the tool calls
    "message_end",
]
TAIL = [
    "turn_end",
    "turn_start",
    "message_start",  # the final answer
    "message_end",
    "turn_end",
    "agent_end",
]
_TYPES = {
    "start": ["tool_execution_start"],
    "update": ["tool_execution_update"],
    "end": ["tool_execution_end"],
    "result": ["message_start", "message_end"],
}


def trace(events: Sequence[AgentEvent]) -> list[str]:
    """The tool part of a run, per call id."""
    out = []
    for event in events:
        if isinstance(event, ToolExecutionStart):
            out.append(f"start:{event.call_id}")
        elif isinstance(event, ToolExecutionUpdate):
            out.append(f"update:{event.call_id}")
        elif isinstance(event, ToolExecutionEnd):
            out.append(f"end:{event.call_id}")
        elif isinstance(event, MessageStart) and isinstance(event.message, ToolMessage):
            out.append(f"result:{event.message.tool_call_id}")
    return out


def one_batch_types(tool_trace: Sequence[str]) -> list[str]:
    """Event types of: prompt, one assistant message with a tool batch, a final answer."""
    middle = [t for item in tool_trace for t in _TYPES[item.split(":")[0]]]
    return HEAD + middle + TAIL


def results_of(recorder: Recorder) -> dict[str, ToolMessage]:
    return {
        e.message.tool_call_id: e.message
        for e in recorder.of(MessageStart)
        if e.message.role == "tool"
    }


def tool_results(recorder: Recorder, turn: int = 0) -> list[ToolMessage]:
    return list(recorder.of(TurnEnd)[turn].tool_results)


async def run_agent(
    replies: Sequence[Reply | str], tools: Sequence[Tool], **agent_options: Any
) -> tuple[Agent, ScriptedModel, Recorder]:
    model = ScriptedModel(replies)
    agent = Agent(stream_fn=model, tools=tools, **agent_options)
    recorder = Recorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_grammar(recorder.events)
    return agent, model, recorder


class Windows:
    """When each tool call ran (perf_counter), and a shared order log."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.log: list[str] = []

    def begin(self, label: str) -> float:
        self.log.append(f"exec:{label}")
        return time.perf_counter()

    def done(self, label: str, started: float) -> None:
        self.spans[label] = (started, time.perf_counter())

    def all_overlap(self) -> bool:
        starts = [s for s, _ in self.spans.values()]
        ends = [e for _, e in self.spans.values()]
        return max(starts) < min(ends)

    def span(self) -> float:
        """From the first call's start to the last call's end."""
        return max(e for _, e in self.spans.values()) - min(s for s, _ in self.spans.values())

    def disjoint(self) -> bool:
        spans = sorted(self.spans.values())
        return all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def sleeping_tools(windows: Windows) -> tuple[Tool, Tool]:
    @tool
    async def nap(label: str, seconds: float) -> str:
        """Sleep asynchronously."""
        started = windows.begin(label)
        await asyncio.sleep(seconds)
        windows.done(label, started)
        return f"napped {label}"

    @tool
    def doze(label: str, seconds: float) -> str:
        """Sleep in a worker thread."""
        started = windows.begin(label)
        time.sleep(seconds)
        windows.done(label, started)
        return f"dozed {label}"

    return nap, doze


def sleep_call(name: str, call_id: str, seconds: float) -> Call:
    return Call(name, {"label": call_id, "seconds": seconds}, id=call_id)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def ping() -> str:
    """Answer pong; takes no arguments."""
    return "pong"


# -- 1. parallel: completion-order ends, call-order results ------------------------------------

# c1 is the slowest, c2 the fastest: completion order c2, c3, c1.
SLEEPS = {"c1": 0.2, "c2": 0.05, "c3": 0.12}
PARALLEL_TRACE = [
    "start:c1",
    "start:c2",
    "start:c3",
    "end:c2",
    "end:c3",
    "end:c1",
    "result:c1",
    "result:c2",
    "result:c3",
]


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(("nap", "nap", "nap"), id="async"),
        pytest.param(("doze", "doze", "doze"), id="sync-threads"),
        pytest.param(("doze", "nap", "doze"), id="mixed"),
    ],
)
async def test_parallel_ends_in_completion_order_results_in_call_order(
    names: tuple[str, str, str],
) -> None:
    windows = Windows()
    calls = [sleep_call(n, cid, SLEEPS[cid]) for n, cid in zip(names, SLEEPS, strict=True)]
    started = time.perf_counter()
    agent, model, recorder = await run_agent([Reply(calls=calls), "done"], sleeping_tools(windows))
    elapsed = time.perf_counter() - started

    assert trace(recorder.events) == PARALLEL_TRACE
    assert recorder.types() == one_batch_types(PARALLEL_TRACE)
    assert [r.tool_call_id for r in tool_results(recorder)] == ["c1", "c2", "c3"]
    assert [m.tool_call_id for m in agent.state.messages if isinstance(m, ToolMessage)] == [
        "c1",
        "c2",
        "c3",
    ]
    assert [m.role for m in model.requests[1].messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
    ]
    assert all(not r.is_error for r in tool_results(recorder))
    # really concurrent: all three were running at one moment, and the batch (from the
    # first tool's start to the last one's end, the tools' own clocks: the run's start-up
    # on a loaded machine is not the batch) took far less than the sum
    assert windows.all_overlap()
    assert windows.span() < sum(SLEEPS.values()) - 0.04
    assert elapsed >= max(SLEEPS.values())
    assert agent.state.last_end_reason == "completed"


async def test_thread_pool_is_bounded_by_tool_threads() -> None:
    windows = Windows()
    _, doze = sleeping_tools(windows)
    model = ScriptedModel(
        [Reply(calls=[sleep_call("doze", f"c{i}", 0.03) for i in range(3)]), "done"]
    )
    recorder = Recorder()
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext.of(tools=[doze]),
        LoopConfig(model="m", tool_threads=1),
        None,
        model,
        recorder,
    )
    check_grammar(recorder.events)
    assert windows.disjoint()  # one worker thread: the sync calls queue up


# -- 2. a call rejected during preparation keeps its place -----------------------------------


def _block_c2(call: BeforeToolCall, signal: object) -> Block | None:
    return Block("c2 is not allowed") if call.call.id == "c2" else None


@pytest.mark.parametrize("rejection", ["unknown-tool", "blocked"])
async def test_rejected_call_in_parallel_batch_keeps_its_place(rejection: str) -> None:
    windows = Windows()
    nap, doze = sleeping_tools(windows)
    middle = (
        Call("no_such_tool", {"x": 1}, id="c2")
        if rejection == "unknown-tool"
        else sleep_call("nap", "c2", 0.01)
    )
    calls = [sleep_call("nap", "c1", 0.1), middle, sleep_call("doze", "c3", 0.02)]
    model = ScriptedModel([Reply(calls=calls), "done"])
    options = {"before_tool_call": _block_c2} if rejection == "blocked" else {}
    agent = Agent(stream_fn=model, tools=[nap, doze], loop_options=options)
    recorder = Recorder()
    agent.subscribe(recorder)

    def mark(event: AgentEvent) -> None:
        line = trace([event])
        windows.log.extend(line)

    agent.subscribe(mark)
    await agent.prompt("go")
    check_grammar(recorder.events)

    expected = [
        "start:c1",
        "start:c2",
        "end:c2",  # rejected at once, before anything ran
        "start:c3",
        "end:c3",
        "end:c1",
        "result:c1",
        "result:c2",
        "result:c3",
    ]
    assert trace(recorder.events) == expected
    assert recorder.types() == one_batch_types(expected)
    # the rejection's end came before any tool started executing
    assert windows.log.index("end:c2") < windows.log.index("exec:c1")
    assert windows.log.index("end:c2") < windows.log.index("exec:c3")
    assert "exec:c2" not in windows.log

    results = tool_results(recorder)
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.is_error for r in results] == [False, True, False]
    if rejection == "blocked":
        assert results[1].content == "c2 is not allowed"
    else:
        assert "no_such_tool" in str(results[1].content)
    assert [m.role for m in model.requests[1].messages][-3:] == ["tool", "tool", "tool"]


# -- 3. unknown tool ---------------------------------------------------------------------------


async def test_unknown_tool_names_tool_and_available_tools_then_continues() -> None:
    agent, model, recorder = await run_agent(
        [Reply(calls=[Call("delete_everything", {}, id="c1")]), "sorry"], [add, ping]
    )
    expected = ["start:c1", "end:c1", "result:c1"]
    assert trace(recorder.events) == expected
    assert recorder.types() == one_batch_types(expected)
    [result] = tool_results(recorder)
    assert result.is_error
    assert result.name == "delete_everything"
    content = str(result.content)
    assert "'delete_everything'" in content
    assert "not found" in content
    assert "Available tools: add, ping" in content
    [end] = recorder.of(ToolExecutionEnd)
    assert end.is_error
    assert end.result == result
    # the loop went on: the model saw the error and answered
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1] == result
    assert agent.state.messages[-1].content == "sorry"
    assert agent.state.last_end_reason == "completed"


async def test_unknown_tool_with_no_tools_registered() -> None:
    _, _, recorder = await run_agent([Reply(calls=[Call("x", {}, id="c1")]), "ok"], [])
    [result] = tool_results(recorder)
    assert result.is_error
    assert "Available tools: none" in str(result.content)


# -- 4. invalid and empty arguments ------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected_bits"),
    [
        pytest.param(
            '{"a": 1, "b": ', ["not valid JSON", 'Received: {"a": 1, "b": '], id="bad-json"
        ),
        pytest.param(
            {"a": "one", "b": 2},
            ["a:", "integer", 'Received: {"a": "one", "b": 2}'],
            id="schema-type",
        ),
        pytest.param({"a": 1}, ["b: Field required", 'Received: {"a": 1}'], id="schema-missing"),
        pytest.param(
            {"a": 1, "b": 2, "c": 3},
            ["c: Extra inputs are not permitted", 'Received: {"a": 1, "b": 2, "c": 3}'],
            id="extra-argument",
        ),
        pytest.param("[1, 2]", ["(arguments)", "Received: [1, 2]"], id="not-an-object"),
        pytest.param(
            "", ["a: Field required", "b: Field required", "Received: (empty)"], id="empty"
        ),
        pytest.param("  ", ["a: Field required", "b: Field required"], id="blank"),
    ],
)
async def test_invalid_arguments_give_error_with_received_text(
    arguments: str | dict[str, Any], expected_bits: list[str]
) -> None:
    ran: list[object] = []

    @tool
    def add2(a: int, b: int) -> int:
        """Add."""
        ran.append((a, b))
        return a + b

    agent, model, recorder = await run_agent(
        [Reply(calls=[Call("add2", arguments, id="c1")]), "fixed"], [add2]
    )
    expected = ["start:c1", "end:c1", "result:c1"]
    assert trace(recorder.events) == expected
    assert recorder.types() == one_batch_types(expected)
    assert ran == []
    [result] = tool_results(recorder)
    assert result.is_error is True
    assert recorder.of(ToolExecutionEnd)[0].is_error is True
    content = str(result.content)
    assert content.startswith("Invalid arguments for add2:")
    for bit in expected_bits:
        assert bit in content, (bit, content)
    assert model.requests[1].messages[-1] == result
    assert agent.state.last_end_reason == "completed"


async def test_bad_json_start_event_shows_raw_text() -> None:
    _, _, recorder = await run_agent([Reply(calls=[Call("add", "{oops", id="c1")]), "ok"], [add])
    [start] = recorder.of(ToolExecutionStart)
    assert start.args == "{oops"
    assert start.name == "add"


@pytest.mark.parametrize("arguments", ["", "{}", "   "])
async def test_tool_without_parameters_accepts_empty_arguments(arguments: str) -> None:
    _, _, recorder = await run_agent(
        [Reply(calls=[Call("ping", arguments, id="c1")]), "ok"], [ping]
    )
    [result] = tool_results(recorder)
    assert result.is_error is False
    assert result.content == "pong"


# -- 5. length stop ----------------------------------------------------------------------------


async def test_length_stop_runs_no_tool_and_asks_to_reissue() -> None:
    ran: list[str] = []

    @tool
    def write(path: str, text: str) -> str:
        """Write a file."""
        ran.append(path)
        return "written"

    calls = [
        Call("write", {"path": "a.txt", "text": "complete"}, id="c1"),
        Call("write", '{"path": "b.txt", "text": "trunc', id="c2"),
    ]
    agent, model, recorder = await run_agent(
        [Reply(text="writing", calls=calls, stop_reason="length"), "re-issued later"], [write]
    )
    assert ran == []
    expected = ["start:c1", "end:c1", "start:c2", "end:c2", "result:c1", "result:c2"]
    assert trace(recorder.events) == expected
    assert recorder.types() == one_batch_types(expected)
    results = tool_results(recorder)
    assert [r.tool_call_id for r in results] == ["c1", "c2"]
    for result in results:
        assert result.is_error
        content = str(result.content)
        assert "'write'" in content
        assert "not executed" in content
        assert "Re-issue the tool call with complete arguments" in content
    assert all(e.is_error for e in recorder.of(ToolExecutionEnd))
    # the next model call happened and saw the errors
    assert len(model.requests) == 2
    seen = model.requests[1].messages
    assert [m.role for m in seen] == ["user", "assistant", "tool", "tool"]
    assert seen[1].stop_reason == "length"
    assert list(seen[2:]) == results
    assert agent.state.last_end_reason == "completed"


# -- 6. a tool that raises ---------------------------------------------------------------------


async def test_tool_exception_becomes_error_result_and_run_goes_on() -> None:
    @tool
    def explode(n: int) -> str:
        """Fail in a thread."""
        raise ValueError(f"bad input {n}")

    @tool
    async def explode_async(n: int) -> str:
        """Fail in the loop."""
        await asyncio.sleep(0)
        raise KeyError(f"missing {n}")

    calls = [
        Call("explode", {"n": 42}, id="c1"),
        Call("explode_async", {"n": 7}, id="c2"),
        Call("add", {"a": 1, "b": 1}, id="c3"),
    ]
    agent, model, recorder = await run_agent(
        [Reply(calls=calls), Reply(calls=[Call("add", {"a": 2, "b": 2}, id="c4")]), "done"],
        [explode, explode_async, add],
    )
    results = tool_results(recorder)
    assert [r.is_error for r in results] == [True, True, False]
    assert results[0].content == "ValueError: bad input 42"
    assert "KeyError" in str(results[1].content)
    assert "missing 7" in str(results[1].content)
    assert results[2].content == "2"
    # the run went on for two more model calls
    assert len(model.requests) == 3
    assert tool_results(recorder, 1)[0].content == "4"
    assert agent.state.last_end_reason == "completed"


async def test_tool_raising_its_own_timeout_error_is_an_ordinary_error() -> None:
    """A tool's own TimeoutError (a socket or HTTP timeout) is a tool failure like any
    other: it must become an error result with its message, and the run must go on."""

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise TimeoutError(f"connection to {url} timed out")

    agent, model, recorder = await run_agent(
        [Reply(calls=[Call("fetch", {"url": "example.org"}, id="c1")]), "gave up"], [fetch]
    )
    [result] = tool_results(recorder)
    assert result.is_error
    assert "connection to example.org timed out" in str(result.content)
    assert agent.state.last_end_reason == "completed"
    assert len(model.requests) == 2


async def test_tool_own_timeout_error_is_not_reported_as_tool_timeout() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        raise TimeoutError("upstream timed out")

    _, _, recorder = await run_agent(
        [Reply(calls=[Call("fetch", {"url": "x"}, id="c1")]), "ok"],
        [fetch],
        loop_options={"tool_timeout": 5.0},
    )
    [result] = tool_results(recorder)
    assert result.is_error
    assert "upstream timed out" in str(result.content)
    assert "after 5 seconds" not in str(result.content)


# -- 7. after_tool_call ------------------------------------------------------------------------


async def test_after_tool_call_rewrites_content_and_is_error() -> None:
    seen: list[AfterToolCall] = []

    async def after(ctx: AfterToolCall, signal: object) -> ResultOverride | None:
        seen.append(ctx)
        if ctx.call.id == "c1":
            return ResultOverride(content="[redacted]", details={"redacted": True})
        if ctx.call.id == "c2":
            return ResultOverride(is_error=True)
        return None

    calls = [
        Call("add", {"a": 1, "b": 2}, id="c1"),
        Call("add", {"a": 3, "b": 4}, id="c2"),
        Call("add", {"a": 5, "b": 6}, id="c3"),
    ]
    _, model, recorder = await run_agent(
        [Reply(calls=calls), "ok"], [add], loop_options={"after_tool_call": after}
    )
    results = tool_results(recorder)
    assert [(r.content, r.is_error, r.details) for r in results] == [
        ("[redacted]", False, {"redacted": True}),
        ("7", True, None),
        ("11", False, None),
    ]
    # the hook saw the tool's own result and the validated arguments
    by_id = {ctx.call.id: ctx for ctx in seen}
    assert by_id["c1"].result == ToolResult(content="3")
    assert (by_id["c2"].args.a, by_id["c2"].args.b) == (3, 4)
    assert by_id["c1"].tool is add
    # the end events and the model see the rewritten results
    ends = {e.call_id: e for e in recorder.of(ToolExecutionEnd)}
    assert ends["c1"].result.content == "[redacted]"
    assert ends["c2"].is_error is True
    assert list(model.requests[1].messages[-3:]) == results


async def test_after_tool_call_exception_becomes_error_result() -> None:
    def after(ctx: AfterToolCall, signal: object) -> ResultOverride | None:
        if ctx.call.id == "c1":
            raise RuntimeError("audit log unavailable")
        return None

    calls = [Call("add", {"a": 1, "b": 2}, id="c1"), Call("add", {"a": 1, "b": 1}, id="c2")]
    agent, model, recorder = await run_agent(
        [Reply(calls=calls), "ok"], [add], loop_options={"after_tool_call": after}
    )
    results = tool_results(recorder)
    assert results[0].is_error
    assert "after_tool_call" in str(results[0].content)
    assert "audit log unavailable" in str(results[0].content)
    assert (results[1].content, results[1].is_error) == ("2", False)
    assert agent.state.last_end_reason == "completed"
    assert len(model.requests) == 2


# -- 8. before_tool_call and prepare_arguments -------------------------------------------------


async def test_before_tool_call_block_reason_reaches_model() -> None:
    ran: list[int] = []
    seen: list[BeforeToolCall] = []

    @tool
    def rm(depth: int) -> str:
        """Remove things."""
        ran.append(depth)
        return "removed"

    async def before(ctx: BeforeToolCall, signal: object) -> Block | None:
        seen.append(ctx)
        if ctx.args.depth > 1:
            return Block("recursive removal is disabled in this notebook")
        return None

    calls = [Call("rm", {"depth": 5}, id="c1"), Call("rm", {"depth": 1}, id="c2")]
    _, model, recorder = await run_agent(
        [Reply(calls=calls), "understood"], [rm], loop_options={"before_tool_call": before}
    )
    assert ran == [1]
    results = tool_results(recorder)
    assert results[0].is_error
    assert results[0].content == "recursive removal is disabled in this notebook"
    assert (results[1].content, results[1].is_error) == ("removed", False)
    sent = model.requests[1].messages[2]
    assert isinstance(sent, ToolMessage)
    assert sent.content == "recursive removal is disabled in this notebook"
    assert [ctx.call.id for ctx in seen] == ["c1", "c2"]
    assert seen[0].tool is rm
    assert seen[0].assistant_message.tool_calls[0].id == "c1"


async def test_before_tool_call_default_block_reason_and_exception() -> None:
    def before(ctx: BeforeToolCall, signal: object) -> Block | None:
        if ctx.call.id == "c1":
            return Block()
        raise RuntimeError("policy store offline")

    calls = [Call("ping", {}, id="c1"), Call("ping", {}, id="c2")]
    _, _, recorder = await run_agent(
        [Reply(calls=calls), "ok"], [ping], loop_options={"before_tool_call": before}
    )
    results = tool_results(recorder)
    assert results[0].is_error
    assert results[0].content == "Tool execution was blocked"
    assert results[1].is_error
    assert "before_tool_call failed" in str(results[1].content)
    assert "policy store offline" in str(results[1].content)


class ReadArgs(BaseModel):
    paths: list[str]


async def test_prepare_arguments_runs_before_validation() -> None:
    received: list[ReadArgs] = []

    def legacy(raw: Any) -> Any:
        # old prompts sent {"path": "x"}; the schema now wants {"paths": [...]}
        if isinstance(raw, dict) and "path" in raw:
            raw = {"paths": [raw.pop("path")], **raw}
        return raw

    def read(call_id: str, args: ReadArgs, signal: object, on_update: object) -> str:
        received.append(args)
        return ",".join(args.paths)

    read_tool = Tool(
        name="read",
        description="Read files.",
        parameters=ReadArgs.model_json_schema(),
        execute=read,  # type: ignore[arg-type]
        args_model=ReadArgs,
        prepare_arguments=legacy,
    )
    calls = [
        Call("read", {"path": "old.txt"}, id="c1"),
        Call("read", {"paths": ["a", "b"]}, id="c2"),
    ]
    _, _, recorder = await run_agent([Reply(calls=calls), "ok"], [read_tool])
    results = tool_results(recorder)
    assert [(r.content, r.is_error) for r in results] == [("old.txt", False), ("a,b", False)]
    assert received == [ReadArgs(paths=["old.txt"]), ReadArgs(paths=["a", "b"])]
    # the start event shows what the model sent, not the prepared shape
    assert recorder.of(ToolExecutionStart)[0].args == {"path": "old.txt"}


async def test_prepare_arguments_exception_becomes_error_result() -> None:
    def broken(raw: Any) -> Any:
        raise LookupError("no migration for this shape")

    bad = Tool(
        name="bad",
        description="x",
        parameters={"type": "object"},
        execute=lambda *a: "never",
        prepare_arguments=broken,
    )
    _, _, recorder = await run_agent([Reply(calls=[Call("bad", {}, id="c1")]), "ok"], [bad])
    [result] = tool_results(recorder)
    assert result.is_error
    assert "no migration for this shape" in str(result.content)


# -- 9. sequential execution -------------------------------------------------------------------

SEQUENTIAL_TRACE = [
    "start:c1",
    "end:c1",
    "result:c1",
    "start:c2",
    "end:c2",
    "result:c2",
    "start:c3",
    "end:c3",
    "result:c3",
]


async def test_sequential_mode_on_agent() -> None:
    windows = Windows()
    calls = [
        sleep_call("nap", "c1", 0.04),
        sleep_call("doze", "c2", 0.01),
        sleep_call("nap", "c3", 0.02),
    ]
    _, _, recorder = await run_agent(
        [Reply(calls=calls), "done"], sleeping_tools(windows), tool_execution="sequential"
    )
    assert trace(recorder.events) == SEQUENTIAL_TRACE
    assert recorder.types() == one_batch_types(SEQUENTIAL_TRACE)
    assert windows.disjoint()
    assert [r.tool_call_id for r in tool_results(recorder)] == ["c1", "c2", "c3"]


async def test_sequential_mode_in_loop_config_with_rejected_call() -> None:
    windows = Windows()
    calls = [
        sleep_call("doze", "c1", 0.03),
        Call("missing", {}, id="c2"),
        sleep_call("nap", "c3", 0.01),
    ]
    model = ScriptedModel([Reply(calls=calls), "done"])
    recorder = Recorder()
    new = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext.of(tools=sleeping_tools(windows)),
        LoopConfig(model="m", tool_execution="sequential"),
        None,
        model,
        recorder,
    )
    check_grammar(recorder.events)
    assert trace(recorder.events) == SEQUENTIAL_TRACE
    assert recorder.types() == one_batch_types(SEQUENTIAL_TRACE)
    assert windows.disjoint()
    assert [m.role for m in new] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [r.is_error for r in tool_results(recorder)] == [False, True, False]


async def test_one_sequential_tool_forces_whole_batch_sequential() -> None:
    windows = Windows()
    nap, doze = sleeping_tools(windows)

    @tool(sequential=True)
    async def ask(label: str, seconds: float) -> str:
        """An interactive tool."""
        started = windows.begin(label)
        await asyncio.sleep(seconds)
        windows.done(label, started)
        return "answered"

    calls = [
        sleep_call("nap", "c1", 0.03),
        sleep_call("ask", "c2", 0.01),
        sleep_call("doze", "c3", 0.02),
    ]
    _, _, recorder = await run_agent([Reply(calls=calls), "done"], [nap, doze, ask])
    assert trace(recorder.events) == SEQUENTIAL_TRACE
    assert recorder.types() == one_batch_types(SEQUENTIAL_TRACE)
    assert windows.disjoint()

    # and a batch without it stays parallel
    windows2 = Windows()
    calls2 = [sleep_call("nap", "c1", 0.05), sleep_call("doze", "c2", 0.05)]
    _, _, recorder2 = await run_agent([Reply(calls=calls2), "done"], sleeping_tools(windows2))
    assert trace(recorder2.events)[:2] == ["start:c1", "start:c2"]
    assert windows2.all_overlap()


# -- 10. on_update -----------------------------------------------------------------------------


@tool
def count_sync(n: int, ctx: ToolContext) -> str:
    """Count in a worker thread, reporting progress."""
    for i in range(n):
        ctx.on_update(ToolResult(content=f"sync {i}", details={"i": i}))
    return f"counted {n}"


@tool
async def count_async(n: int, ctx: ToolContext) -> str:
    """Count in the loop, reporting progress."""
    for i in range(n):
        ctx.on_update(ToolResult(content=f"async {i}"))
        await asyncio.sleep(0.001)
    ctx.on_update(ToolResult(content="async last"))
    return f"counted {n}"


def updates_of(recorder: Recorder, call_id: str) -> list[Any]:
    return [e.partial.content for e in recorder.of(ToolExecutionUpdate) if e.call_id == call_id]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_on_update_events_between_start_and_end_in_order(mode: str) -> None:
    calls = [Call("count_sync", {"n": 30}, id="c1"), Call("count_async", {"n": 3}, id="c2")]
    _, _, recorder = await run_agent(
        [Reply(calls=calls), "done"], [count_sync, count_async], tool_execution=mode
    )
    assert updates_of(recorder, "c1") == [f"sync {i}" for i in range(30)]
    assert updates_of(recorder, "c2") == ["async 0", "async 1", "async 2", "async last"]
    for call_id in ("c1", "c2"):
        mine = [item for item in trace(recorder.events) if item.endswith(f":{call_id}")]
        n = len(updates_of(recorder, call_id))
        assert mine == [f"start:{call_id}"] + [f"update:{call_id}"] * n + [
            f"end:{call_id}",
            f"result:{call_id}",
        ]
    update = recorder.of(ToolExecutionUpdate)[0]
    assert update.name in ("count_sync", "count_async")
    first_sync = next(e for e in recorder.of(ToolExecutionUpdate) if e.call_id == "c1")
    assert first_sync.partial == ToolResult(content="sync 0", details={"i": 0})
    assert [r.content for r in tool_results(recorder)] == ["counted 30", "counted 3"]
    if mode == "sequential":
        assert trace(recorder.events).index("result:c1") < trace(recorder.events).index("start:c2")


async def test_on_update_exact_sequence_for_single_sync_tool() -> None:
    _, _, recorder = await run_agent(
        [Reply(calls=[Call("count_sync", {"n": 2}, id="c1")]), "done"], [count_sync]
    )
    expected = ["start:c1", "update:c1", "update:c1", "end:c1", "result:c1"]
    assert trace(recorder.events) == expected
    assert recorder.types() == one_batch_types(expected)


async def test_tool_context_carries_call_id_and_signal() -> None:
    seen: list[ToolContext] = []

    @tool
    def who(ctx: ToolContext) -> str:
        """Report the call id."""
        seen.append(ctx)
        return ctx.call_id

    _, _, recorder = await run_agent([Reply(calls=[Call("who", {}, id="abc")]), "ok"], [who])
    assert tool_results(recorder)[0].content == "abc"
    assert seen[0].signal.aborted is False


# -- 11. tool_timeout --------------------------------------------------------------------------


async def test_tool_timeout_gives_slow_tools_an_error_result() -> None:
    windows = Windows()
    nap, doze = sleeping_tools(windows)
    calls = [
        sleep_call("nap", "c1", 5.0),
        sleep_call("nap", "c2", 0.01),
        sleep_call("doze", "c3", 2.0),
    ]
    started = time.perf_counter()
    agent, model, recorder = await run_agent(
        [Reply(calls=calls), "too slow"], [nap, doze], loop_options={"tool_timeout": 0.1}
    )
    elapsed = time.perf_counter() - started
    assert elapsed < 1.5  # neither the async nap (5 s) nor the thread (2 s) was waited for
    tool_trace = trace(recorder.events)
    assert tool_trace[:4] == ["start:c1", "start:c2", "start:c3", "end:c2"]
    assert set(tool_trace[4:6]) == {"end:c1", "end:c3"}  # both time out at about 0.1 s
    assert tool_trace[6:] == ["result:c1", "result:c2", "result:c3"]
    assert recorder.types() == one_batch_types(tool_trace)
    results = tool_results(recorder)
    assert [r.is_error for r in results] == [True, False, True]
    for result in (results[0], results[2]):
        assert "timed out after 0.1 seconds" in str(result.content)
        assert f"'{result.name}'" in str(result.content)
    assert results[1].content == "napped c2"
    assert "c1" not in windows.spans  # the async tool was cancelled
    assert len(model.requests) == 2
    assert agent.state.last_end_reason == "completed"


# -- 12. return values -------------------------------------------------------------------------


class Point(BaseModel):
    x: int
    y: int


async def test_return_values_become_tool_messages() -> None:
    @tool
    def as_str() -> str:
        """Text."""
        return "plain text, not JSON"

    @tool
    def as_dict() -> dict[str, Any]:
        """A dict."""
        return {"rows": 2, "names": ["a", "b"]}

    @tool
    async def as_list() -> list[int]:
        """A list."""
        return [1, 2, 3]

    @tool
    def as_model() -> Point:
        """A model."""
        return Point(x=1, y=2)

    @tool
    async def as_result() -> ToolResult:
        """A full result."""
        return ToolResult(content="3 rows failed", details={"failed": [1, 2, 3]}, is_error=True)

    @tool
    def as_none() -> None:
        """Nothing."""

    def raw(call_id: str, args: Any, signal: object, on_update: object) -> ToolResult:
        return ToolResult(content="raw", details={"call": call_id})

    raw_tool = Tool(name="raw", description="raw", parameters={"type": "object"}, execute=raw)
    names = ["as_str", "as_dict", "as_list", "as_model", "as_result", "as_none", "raw"]
    _, _, recorder = await run_agent(
        [Reply(calls=[Call(n, {}, id=f"c_{n}") for n in names]), "ok"],
        [as_str, as_dict, as_list, as_model, as_result, as_none, raw_tool],
    )
    results = {r.name: r for r in tool_results(recorder)}
    assert results["as_str"].content == "plain text, not JSON"
    assert json.loads(str(results["as_dict"].content)) == {"rows": 2, "names": ["a", "b"]}
    assert json.loads(str(results["as_list"].content)) == [1, 2, 3]
    assert json.loads(str(results["as_model"].content)) == {"x": 1, "y": 2}
    assert json.loads(str(results["as_none"].content)) is None
    r = results["as_result"]
    assert (r.content, r.details, r.is_error) == ("3 rows failed", {"failed": [1, 2, 3]}, True)
    assert results["raw"].details == {"call": "c_raw"}
    assert all(not results[n].is_error for n in names if n != "as_result")
    ends = {e.name: e for e in recorder.of(ToolExecutionEnd)}
    assert ends["as_result"].is_error is True
    assert ends["as_result"].result.details == {"failed": [1, 2, 3]}
    assert [r.name for r in tool_results(recorder)] == names
