"""A real MCP server (the SDK's FastMCP, over stdio) for the cell's tests: an echo, and a tool
that says whether the server was given a secret through its environment, without echoing it
(its length and the start of its sha256), so a test can prove a ``${VAR}`` reference
reached the server while the value itself never travels back."""

from __future__ import annotations

import hashlib
import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("secret-echo", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def secret_seen(name: str) -> str:
    """Whether the environment variable ``name`` is set here, by length and hash."""
    value = os.environ.get(name)
    if value is None:
        return f"{name}: not set"
    return f"{name}: set, {len(value)} characters, sha256 {hashlib.sha256(value.encode()).hexdigest()[:12]}"


@server.tool()
def leak(name: str) -> str:
    """Return the variable's value itself (the redactor must hide it on every way out)."""
    return f"the value is {os.environ.get(name, '')}"


if __name__ == "__main__":
    server.run("stdio")
