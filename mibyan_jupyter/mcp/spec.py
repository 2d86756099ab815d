"""One configured MCP server, as read from an ``mcpServers`` file (Claude Desktop's shape).

Why a plain frozen record: the configuration (``config.py``: files, trust, ``%agent mcp``)
and the runtime (``hub.py``: the dedicated thread, connections, restarts) meet here and
nowhere else. Secrets stay references: ``env`` and ``headers`` keep ``${VAR}`` as written,
and :meth:`ServerSpec.resolved_env` / :meth:`ServerSpec.resolved_headers` fill them from the
environment only when the server starts, so what is stored, shown or exported never holds
the value (docs/architecture.md, "Tools from outside").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Transport = Literal["stdio", "http"]
DEFAULT_TIMEOUT_S = 60.0
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpConfigError(ValueError):
    """A server's configuration cannot be used; the message is one actionable line."""


@dataclass(frozen=True)
class ServerSpec:
    """A server: ``command``/``args``/``env``/``cwd`` for stdio, ``url``/``headers`` for
    Streamable HTTP. ``source`` is the file it came from (shown by ``%agent mcp list``)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    disabled: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds one tool call may take before it is given up (and the server restarted)."""
    source: str = ""

    def resolved_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` with every ``${VAR}`` filled from ``environ`` (default ``os.environ``)."""
        return {key: self._resolve(value, environ) for key, value in self.env.items()}

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """``headers`` with every ``${VAR}`` filled from ``environ`` (default ``os.environ``)."""
        return {key: self._resolve(value, environ) for key, value in self.headers.items()}

    def _resolve(self, value: str, environ: Mapping[str, str] | None) -> str:
        source = os.environ if environ is None else environ

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in source:
                raise McpConfigError(
                    f"MCP server {self.name!r} needs the environment variable {name} "
                    f"(referenced as ${{{name}}} in {self.source or 'its configuration'}); "
                    "set it before the cell runs"
                )
            return source[name]

        return _REFERENCE.sub(fill, value)
