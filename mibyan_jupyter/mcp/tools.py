"""One MCP server's tools as core :class:`Tool` objects, and its results as tool results.

Why a mapping of our own (docs/architecture.md, "Tools from outside"): a server is code the
user configured but did not write, so everything it sends is untrusted input.

- **Names** are ``<server>__<tool>`` with every character outside ``[A-Za-z0-9_-]``
  replaced by ``_`` (what every provider accepts). A name over 64 characters keeps its
  first 55 and gets ``_`` and 8 hex digits of the SHA-1 of ``server/tool`` as it was; a
  name another tool of the cell already has gets the same hash suffix, so names stay unique.
- **Descriptions** start with ``[MCP server NAME]`` and are capped at
  :data:`DESCRIPTION_LIMIT` characters (they travel in every request).
- **Parameters** are the server's JSON schema as it is (``args_model`` ``None``: the server
  validates); a schema that is not an object schema drops the tool (the model could never
  call it with the JSON object every API sends).
- ``side_effects`` is always ``True``: a server's ``readOnlyHint`` is its own claim, so a
  call is asked for like any other tool that acts (the policy's default, "ask").
- **Results**: text as text, images as image parts (``data:`` URLs, what the kernel's own
  tools return), embedded resources as their text or, for a blob, one line describing it
  (an image blob as an image), audio and resource links as one line; ``isError`` is
  ``is_error``; ``structuredContent`` is kept in ``details["mcp_structured"]`` and, when
  the result has no text, sent as JSON text. Size limits are the loop's, applied to every
  tool's result in one place (``core/results.py``, "Spill"): nothing is re-capped here.
- ``details`` always carry ``{"mcp_server": NAME, "mcp_tool": ORIGINAL}``.

This module needs no SDK import: it reads the SDK's result objects by their fields.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.core.json_text import clean_json
from mibyan_jupyter.core.messages import ContentPart, ImagePart, ImageUrl, TextPart
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import OnUpdate, Tool, ToolResult

DESCRIPTION_LIMIT = 1024
NAME_LIMIT = 64
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

CallFn = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
"""How a tool reaches its server: ``call(original tool name, arguments)``."""


@dataclass(eq=False)
class McpTool(Tool):
    """A :class:`Tool` that a server offers; ``mcp_server`` and ``mcp_tool`` name it there
    (the same keys as its results' ``details``; the approval card and ``%agent mcp tools``
    show them)."""

    mcp_server: str = ""
    mcp_tool: str = ""


def tool_name(server: str, original: str, taken: Iterable[str] = ()) -> str:
    """The model-facing name of ``original`` of ``server`` (the rule in the module's text)."""
    name = _UNSAFE.sub("_", f"{server}{SEPARATOR}{original}")
    if len(name) <= NAME_LIMIT and name not in set(taken):
        return name
    digest = hashlib.sha1(f"{server}/{original}".encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - 9]}_{digest}"


def object_schema(schema: Any) -> dict[str, Any] | None:
    """The schema if it describes a JSON object (``type`` missing is taken as one)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    cleaned: dict[str, Any] = clean_json(schema)
    cleaned["type"] = "object"
    cleaned.setdefault("properties", {})
    return cleaned


def server_tools(
    server: str, listed: Iterable[Any], call: CallFn, taken: Iterable[str] = ()
) -> list[Tool]:
    """The server's listed tools (SDK ``Tool`` objects) as core tools calling ``call``."""
    names = set(taken)
    tools: list[Tool] = []
    for item in listed:
        schema = object_schema(getattr(item, "inputSchema", None))
        if schema is None:
            continue
        name = tool_name(server, item.name, names)
        names.add(name)
        tools.append(_one_tool(server, item, name, schema, call))
    return tools


def _one_tool(server: str, item: Any, name: str, schema: dict[str, Any], call: CallFn) -> Tool:
    original: str = item.name
    text = " ".join(str(item.description or item.title or original).split())
    description = f"[MCP server {server}] {text}"
    if len(description) > DESCRIPTION_LIMIT:
        description = description[: DESCRIPTION_LIMIT - 1] + "…"

    async def execute(
        call_id: str, args: Any, signal: AbortSignal, on_update: OnUpdate
    ) -> ToolResult:
        return await call(original, dict(args))

    return McpTool(
        name=name,
        description=description,
        parameters=schema,
        execute=execute,
        side_effects=True,
        mcp_server=server,
        mcp_tool=original,
    )


def origin(server: str, tool: str) -> dict[str, object]:
    """The ``details`` every result of this tool carries."""
    return {"mcp_server": server, "mcp_tool": tool}


def error_result(server: str, tool: str, text: str) -> ToolResult:
    """A failed call's result (crash, hang, timeout, a tool no longer offered)."""
    return ToolResult(text, details=origin(server, tool), is_error=True)


def to_result(server: str, tool: str, result: Any) -> ToolResult:
    """An SDK ``CallToolResult`` as a tool result (the mapping in the module's text)."""
    parts = [part for item in result.content or () for part in _parts(item)]
    details = origin(server, tool)
    structured = getattr(result, "structuredContent", None)
    if structured is not None:
        details["mcp_structured"] = clean_json(structured)
        if not any(isinstance(part, TextPart) for part in parts):
            parts.insert(
                0, TextPart(text=json.dumps(details["mcp_structured"], ensure_ascii=False))
            )
    if not parts:
        parts = [TextPart(text="[the tool returned no content]")]
    content: str | tuple[ContentPart, ...]
    if all(isinstance(part, TextPart) for part in parts):
        content = "\n".join(part.text for part in parts if isinstance(part, TextPart))
    else:
        content = tuple(parts)
    return ToolResult(content, details=details, is_error=bool(result.isError))


def _parts(item: Any) -> list[ContentPart]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextPart(text=str(item.text))]
    if kind == "image":
        return [_image(str(item.mimeType), str(item.data), "an image")]
    if kind == "audio":
        return [TextPart(text=f"[audio ({item.mimeType}, {_size(item.data)}): not shown]")]
    if kind == "resource_link":
        return [TextPart(text=f"[resource link: {item.name} {item.uri} ({item.mimeType or '?'})]")]
    if kind == "resource":
        return [_resource(item.resource)]
    return [TextPart(text=f"[content of type {kind!r}: not shown]")]


def _resource(resource: Any) -> ContentPart:
    mime = resource.mimeType or "unknown type"
    text = getattr(resource, "text", None)
    if text is not None:
        return TextPart(text=f"[resource {resource.uri} ({mime})]\n{text}")
    blob = str(getattr(resource, "blob", ""))
    return _image(mime, blob, f"resource {resource.uri}")


def _image(mime: str, data: str, what: str) -> ContentPart:
    """An image part when the type is one the models read, else one line describing it."""
    if mime in _IMAGE_TYPES:
        return ImagePart(image_url=ImageUrl(url=f"data:{mime};base64,{data}"))
    return TextPart(text=f"[{what}: {mime}, {_size(data)} (binary, not shown)]")


def _size(base64_text: str) -> str:
    """The decoded size of base64 text, without decoding it."""
    text = base64_text.strip()
    return f"{len(text) * 3 // 4 - (len(text) - len(text.rstrip('='))):,} bytes"
