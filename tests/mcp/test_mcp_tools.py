"""How one server's tools become core tools and its results tool results (no server needed:
the SDK's own result types are built here), the runner's thread hand-over, and that
importing the hub imports no SDK."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading

import pytest
from mcp import types

from mibyan_jupyter.core.messages import ImagePart, TextPart
from mibyan_jupyter.mcp.runner import Runner
from mibyan_jupyter.mcp.tools import McpTool, object_schema, server_tools, to_result, tool_name

PNG = base64.b64encode(b"\x89PNG fake").decode()


def test_names_are_sanitized_unique_and_at_most_64_characters() -> None:
    assert tool_name("files", "read_file") == "files__read_file"
    assert tool_name("my server", "get.item/v2") == "my_server__get_item_v2"
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64
    assert long.startswith("s" * 40 + "__" + "t" * 13 + "_")
    assert long != tool_name("s" * 40, "t" * 41)  # the hash is of the names as they were
    first = tool_name("a", "b.c")
    second = tool_name("a", "b_c", taken=[first])
    assert first == "a__b_c"
    assert second != first
    assert len(second) <= 64
    assert second.startswith("a__b_c_")


def test_only_object_schemas_make_tools() -> None:
    listed = [
        types.Tool(name="good", description="Fine.", inputSchema={"type": "object"}),
        types.Tool(name="bad", description="Array.", inputSchema={"type": "array"}),
    ]

    async def call(tool: str, arguments: dict[str, object]) -> object:
        raise AssertionError("not called")

    (tool,) = server_tools("srv", listed, call)  # type: ignore[arg-type]
    assert isinstance(tool, McpTool)
    assert tool.name == "srv__good"
    assert tool.parameters == {"type": "object", "properties": {}}
    assert tool.description == "[MCP server srv] Fine."
    assert tool.side_effects is True  # whatever readOnlyHint says
    assert object_schema({"properties": {"a": {"type": "string"}}}) == {
        "properties": {"a": {"type": "string"}},
        "type": "object",
    }
    assert object_schema("not a schema") is None


def test_a_read_only_hint_still_asks_and_a_long_description_is_capped() -> None:
    hinted = types.Tool(
        name="look",
        description="x" * 5000,
        inputSchema={"type": "object"},
        annotations=types.ToolAnnotations(readOnlyHint=True),
    )

    async def call(tool: str, arguments: dict[str, object]) -> object:
        raise AssertionError("not called")

    (tool,) = server_tools("srv", [hinted], call)  # type: ignore[arg-type]
    assert tool.side_effects is True
    assert len(tool.description) == 1024
    assert tool.description.endswith("…")


def result(*content: object, structured: object = None, error: bool = False) -> object:
    return types.CallToolResult(
        content=list(content),  # type: ignore[arg-type]
        structuredContent=structured,  # type: ignore[arg-type]
        isError=error,
    )


def test_every_kind_of_content_maps() -> None:
    mapped = to_result(
        "srv",
        "t",
        result(
            types.TextContent(type="text", text="words"),
            types.ImageContent(type="image", data=PNG, mimeType="image/png"),
            types.ImageContent(type="image", data=PNG, mimeType="image/tiff"),
            types.AudioContent(type="audio", data="AAAA", mimeType="audio/wav"),
            types.ResourceLink(type="resource_link", name="doc", uri="file:///doc.md"),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///p.png", mimeType="image/png", blob=PNG
                ),
            ),
        ),
    )
    assert isinstance(mapped.content, tuple)
    kinds = [type(part) for part in mapped.content]
    assert kinds == [TextPart, ImagePart, TextPart, TextPart, TextPart, ImagePart]
    texts = [part.text for part in mapped.content if isinstance(part, TextPart)]
    assert texts[1] == "[an image: image/tiff, 9 bytes (binary, not shown)]"
    assert texts[2] == "[audio (audio/wav, 3 bytes): not shown]"
    assert texts[3] == "[resource link: doc file:///doc.md (?)]"
    assert mapped.details == {"mcp_server": "srv", "mcp_tool": "t"}


def test_structured_output_without_text_is_sent_as_json_and_errors_stay_errors() -> None:
    structured = to_result("srv", "t", result(structured={"rows": 3}))
    assert structured.content == '{"rows": 3}'
    assert structured.details is not None
    assert structured.details["mcp_structured"] == {"rows": 3}
    empty = to_result("srv", "t", result(error=True))
    assert empty.is_error
    assert empty.content == "[the tool returned no content]"
    odd = to_result("s", "t", result(structured={"name": "\ud800"}))  # a lone surrogate
    assert json.loads(str(odd.content)) == {"name": "\ufffd"}


async def test_the_runner_hands_over_and_cancelling_the_caller_cancels_there() -> None:
    runner = Runner(name="mibyan-mcp-test-runner")
    try:
        seen: list[str] = []
        cancelled = threading.Event()

        async def where() -> str:
            return threading.current_thread().name

        async def long() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        assert await runner.run(where()) == "mibyan-mcp-test-runner"
        seen.append(runner.run_sync(where(), 5))
        assert seen == ["mibyan-mcp-test-runner"]
        task = asyncio.ensure_future(runner.run(long()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(cancelled.wait, 5)
        with pytest.raises(TimeoutError):
            runner.run_sync(asyncio.sleep(5), 0.05)

        async def inside() -> None:
            runner.run_sync(where())

        with pytest.raises(RuntimeError, match="own thread"):
            await runner.run(inside())
    finally:
        runner.close()


def test_importing_the_hub_imports_no_sdk() -> None:
    code = (
        "import sys, mibyan_jupyter.mcp.hub, mibyan_jupyter.mcp.tools\n"
        "print(sorted(m for m in ('mcp', 'anyio', 'httpx', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr
