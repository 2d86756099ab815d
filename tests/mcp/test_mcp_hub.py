"""The MCP hub against a real server (FastMCP, tests/mcp/servers/demo.py) over stdio and over
Streamable HTTP: tools listed as core tools, calls and their results (text, image, embedded
resources, isError, structured output), a hang past the timeout and a crash mid-call (an
error result naming the server, then a restarted server), ``tools/list_changed``."""

from __future__ import annotations

import asyncio

import pytest
from conftest import TIMEOUT_S, HttpServer, stdio_spec

from mibyan_jupyter.core import Agent, Call, Reply, ScriptedModel
from mibyan_jupyter.core.approval import ApprovalGate, ApprovalRequest, Approved, Denied
from mibyan_jupyter.core.events import ToolExecutionEnd
from mibyan_jupyter.core.messages import ImagePart
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import ToolResult
from mibyan_jupyter.mcp.hub import McpHub, ServerStatus
from mibyan_jupyter.mcp.spec import ServerSpec
from mibyan_jupyter.mcp.tools import McpTool

pytestmark = pytest.mark.slow


@pytest.fixture
def hub(shared_hub: McpHub) -> McpHub:
    return shared_hub


def status_of(hub: McpHub, name: str) -> ServerStatus:
    return next(status for status in hub.status() if status.name == name)


async def test_tools_are_listed_as_core_tools_and_called(hub: McpHub, spec: ServerSpec) -> None:
    tools = {tool.name: tool for tool in await hub.tools(spec)}
    prefix = f"{spec.name}__"
    assert {f"{prefix}echo", f"{prefix}image", f"{prefix}crash", f"{prefix}weather"} <= set(tools)
    echo = tools[f"{prefix}echo"]
    assert isinstance(echo, McpTool)
    assert (echo.mcp_server, echo.mcp_tool) == (spec.name, "echo")
    assert echo.side_effects is True
    assert echo.args_model is None
    assert echo.description.startswith(f"[MCP server {spec.name}] Return the text")
    assert echo.parameters["type"] == "object"
    assert "text" in echo.parameters["properties"]
    result = await echo.execute("c1", {"text": "hello"}, AbortSignal(), lambda _: None)
    assert isinstance(result, ToolResult)
    assert (result.content, result.is_error) == ("hello", False)
    assert result.details is not None
    assert result.details["mcp_server"] == spec.name
    assert result.details["mcp_tool"] == "echo"
    status = status_of(hub, spec.name)
    assert (status.state, status.transport) == ("running", spec.transport)
    assert status.tools >= 10
    assert status.error is None
    assert (status.pid is not None) == (spec.transport == "stdio")


async def test_results_map_images_resources_errors_and_structured_output(
    hub: McpHub, spec: ServerSpec
) -> None:
    image = await hub.call(spec, "image", {})
    assert isinstance(image.content, tuple)
    (part,) = image.content
    assert isinstance(part, ImagePart)
    assert part.image_url.url.startswith("data:image/png;base64,")

    resource = await hub.call(spec, "resource", {})
    assert isinstance(resource.content, str)
    assert "[resource file:///notes.txt (text/plain)]\nthe notes" in resource.content
    assert "file:///data.bin: application/octet-stream, 4 bytes (binary" in resource.content

    failed = await hub.call(spec, "fail", {})
    assert failed.is_error
    assert "this tool always fails" in str(failed.content)

    weather = await hub.call(spec, "weather", {"city": "Oslo"})
    assert weather.details is not None
    assert weather.details["mcp_structured"] == {"city": "Oslo", "celsius": 21.5}
    assert not weather.is_error
    assert '"celsius": 21.5' in str(weather.content)


async def test_a_hang_past_the_timeout_is_an_error_and_the_server_restarts(
    hub: McpHub, spec: ServerSpec
) -> None:
    before = await hub.call(spec, "pid", {})
    started = asyncio.get_running_loop().time()
    hung = await hub.call(spec, "hang", {"seconds": TIMEOUT_S + 0.5})
    took = asyncio.get_running_loop().time() - started
    assert hung.is_error, hung
    assert f"MCP server {spec.name!r} did not answer within {TIMEOUT_S:g} s" in str(hung.content)
    assert "restarted on the next call" in str(hung.content)
    assert TIMEOUT_S <= took < TIMEOUT_S + 3.0  # not the 60 s default, not a hang
    after = await hub.call(spec, "pid", {})
    assert not after.is_error, after
    if spec.transport == "stdio":  # a new process (the hung one was killed)
        assert after.content != before.content


async def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_it(hub: McpHub) -> None:
    spec = stdio_spec()
    first = await hub.call(spec, "pid", {})
    crashed = await hub.call(spec, "crash", {})
    assert crashed.is_error
    text = str(crashed.content)
    assert text.startswith("MCP server 'demo' closed the connection during the call of 'crash'")
    assert "demo server: crashing on purpose" in text  # its last stderr line
    status = status_of(hub, "demo")
    assert status.state == "crashed"
    assert status.error is not None
    assert "crash" in status.error
    again = await hub.call(spec, "pid", {})
    assert not again.is_error
    assert again.content != first.content
    assert status_of(hub, "demo").state == "running"


async def test_list_changed_refreshes_the_tool_list(hub: McpHub, spec: ServerSpec) -> None:
    changed: list[str] = []
    unsubscribe = hub.on_tools_changed(changed.append)
    try:
        grown = await hub.call(spec, "grow", {})
        assert grown.content == "grown"
        names = [tool.name for tool in await hub.tools(spec)]
    finally:
        unsubscribe()
    assert f"{spec.name}__late" in names
    assert changed == [spec.name]
    late = await hub.call(spec, "late", {})
    assert late.content == "late answer"


async def test_a_tool_the_server_no_longer_lists_is_an_error(hub: McpHub) -> None:
    result = await hub.call(stdio_spec(), "never_there", {})
    assert result.is_error
    assert result.content == "MCP server 'demo' no longer offers the tool 'never_there'"


async def test_a_server_that_cannot_start_is_an_error_result_naming_it(hub: McpHub) -> None:
    spec = ServerSpec(name="broken", transport="stdio", command="/nonexistent/mcp-server")
    result = await hub.call(spec, "anything", {})
    assert result.is_error
    assert str(result.content).startswith("MCP server 'broken' ")
    assert "cannot start '/nonexistent/mcp-server'" in str(result.content)
    assert status_of(hub, "broken").state == "crashed"


async def test_cancelling_the_caller_cancels_the_call_and_the_server_stays(hub: McpHub) -> None:
    spec = stdio_spec()  # the call (0.5 s) is well within its timeout
    await hub.call(spec, "noop", {})
    call = asyncio.ensure_future(hub.call(spec, "hang", {"seconds": 0.5}))
    await asyncio.sleep(0.1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    again = await hub.call(spec, "echo", {"text": "still here"})
    assert again.content == "still here"
    assert status_of(hub, "demo").state == "running"


async def test_a_changed_spec_restarts_the_server(hub: McpHub) -> None:
    first = await hub.call(stdio_spec("changing"), "pid", {})
    second = await hub.call(stdio_spec("changing", timeout=TIMEOUT_S + 1), "pid", {})
    assert not second.is_error
    assert second.content != first.content


async def test_an_http_server_dying_mid_call_is_an_error_at_once(hub: McpHub) -> None:
    """The SDK would wait for the timeout: the watched transport ends the call instead."""
    server = HttpServer()
    try:
        spec = server.spec("dying", timeout=30)
        await hub.call(spec, "noop", {})
        started = asyncio.get_running_loop().time()
        crashed = await hub.call(spec, "crash", {})
        assert asyncio.get_running_loop().time() - started < 5
    finally:
        server.close()
    assert crashed.is_error
    assert str(crashed.content).startswith(
        "MCP server 'dying' closed the connection during the call of 'crash'"
    )
    gone_now = await hub.call(spec, "noop", {})  # nothing listens there any more
    assert gone_now.is_error
    assert str(gone_now.content).startswith("MCP server 'dying' failed while starting")


async def test_an_agent_asks_before_every_mcp_call_and_a_denial_never_reaches_the_server(
    hub: McpHub,
) -> None:
    """The default policy asks for a side-effecting tool, and every MCP tool is one (a
    server's readOnlyHint is not trusted): the approver sees the call, and what it denies
    never runs (the server's own record of its echo calls shows it)."""
    spec = stdio_spec()
    tools = await hub.tools(spec)
    before = str((await hub.call(spec, "echoed", {})).content)
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest, signal: AbortSignal) -> Approved | Denied:
        asked.append(request)
        return Denied("no") if request.args.get("text") == "secret" else Approved()

    script = ScriptedModel(
        [
            Reply(calls=[Call("demo__echo", {"text": "secret"}, id="c1")]),
            Reply(calls=[Call("demo__echo", {"text": "fine"}, id="c2")]),
            "done",
        ]
    )
    agent = Agent(stream_fn=script, tools=tools, approval=ApprovalGate(approver=approver))
    ended: dict[str, ToolExecutionEnd] = {}
    agent.subscribe(
        lambda e: ended.update({e.call_id: e}) if isinstance(e, ToolExecutionEnd) else None
    )
    assert await agent.achat("echo twice") == "done"
    assert [(r.tool_name, r.args["text"]) for r in asked] == [
        ("demo__echo", "secret"),
        ("demo__echo", "fine"),
    ]
    assert ended["c1"].is_error
    assert "no" in str(ended["c1"].result.content)
    assert ended["c1"].result.details is None or "mcp_server" not in ended["c1"].result.details
    assert not ended["c2"].is_error
    assert ended["c2"].result.content == "fine"
    assert ended["c2"].result.details is not None
    assert ended["c2"].result.details["mcp_server"] == "demo"
    after = str((await hub.call(spec, "echoed", {})).content)
    assert after.splitlines()[len(before.splitlines()) :] == ["fine"]
