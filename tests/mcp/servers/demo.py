"""A real MCP server made with the SDK's own server API (FastMCP), for the hub's tests.

Run as ``python demo.py stdio`` (the client starts it over stdin/stdout) or ``python
demo.py http`` (Streamable HTTP on 127.0.0.1, a port the OS picks; the first line on stdout
is ``PORT <n>`` once it listens). Each tool is one behaviour the client must handle: a
plain answer, an image, a crash mid-call, a hang, a tool list that changes, an embedded
resource, an error, structured output, and the server's own pid (for the orphan tests). With
``DEMO_EXIT_FILE`` set, a stdio server that was stopped in order (its stdin closed, not a
signal) writes that file as it exits.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys
import time
from typing import Any

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import BlobResourceContents, EmbeddedResource, TextResourceContents

# A 1x1 PNG (the image tool's answer).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

server = FastMCP("demo", log_level="WARNING")


ECHOED: list[str] = []


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    ECHOED.append(text)
    return text


@server.tool()
def echoed() -> str:
    """What ``echo`` was called with so far, one per line (what reached this server)."""
    return "\n".join(ECHOED)


@server.tool()
def noop() -> str:
    """Do nothing (the benchmark's call)."""
    return "ok"


@server.tool()
def pid() -> str:
    """This server process's pid."""
    return str(os.getpid())


@server.tool()
def image() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    sys.stderr.write("demo server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Block the whole server (a sync tool holds its event loop) for ``seconds``."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
async def grow(ctx: Context[Any, Any, Any]) -> str:
    """Add the tool ``late`` and tell the client that the tool list changed."""
    if "late" not in {t.name for t in await server.list_tools()}:
        server.add_tool(lambda: "late answer", name="late", description="Added by grow.")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def resource() -> list[EmbeddedResource]:
    """Two embedded resources: a text one and a blob."""
    text = TextResourceContents(uri="file:///notes.txt", mimeType="text/plain", text="the notes")
    blob = BlobResourceContents(
        uri="file:///data.bin",
        mimeType="application/octet-stream",
        blob=base64.b64encode(b"\x00\x01\x02\x03").decode(),
    )
    return [
        EmbeddedResource(type="resource", resource=text),
        EmbeddedResource(type="resource", resource=blob),
    ]


@server.tool()
def fail() -> str:
    """Always fails (the result has isError)."""
    raise ToolError("this tool always fails")


@server.tool(structured_output=True)
def weather(city: str) -> dict[str, Any]:
    """Structured output: a dict the client receives as structuredContent."""
    return {"city": city, "celsius": 21.5}


async def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await http.serve(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        asyncio.run(serve_http())
    else:
        server.run("stdio")  # returns when the client closes stdin (an orderly stop)
        if exit_file := os.environ.get("DEMO_EXIT_FILE"):
            with open(exit_file, "w") as file:
                file.write("stdin closed\n")
