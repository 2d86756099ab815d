"""The no-key demo model: a function model that behaves like a small, polite agent.

It needs no provider, so teaching notebooks run on Binder and in CI. It still shows what
matters: thinking, streamed Markdown, a tool call (with arguments made up from the tool's
schema, so a side-effecting tool asks for approval), and an answer built from the result.
"""

from __future__ import annotations

import re
from typing import Any

from .fakes import Call, FunctionModel, Reply
from .messages import TextPart, ToolMessage, UserMessage, content_text
from .stream import ModelRequest, ToolSpec

DEMO_MODEL_NAME = "demo"


_FENCED = re.compile(r"```[ \t]*(?P<info>[\w+-]*)[^\n]*\n(?P<body>.*?)```", re.S)
_CODE_LANGUAGES = {"code": ("python", "py", "python3", ""), "command": ("sh", "bash", "shell", "")}
_CODE_DEFAULTS = {
    "code": 'print("Hello from the demo model!")',
    "command": "echo hello from the demo model",
}


def _fenced(prompt: str, languages: tuple[str, ...]) -> str | None:
    """The first fenced block of the prompt in one of ``languages`` ("" = no info string):
    the demo runs the code a lesson shows it, so teaching notebooks can script it."""
    for match in _FENCED.finditer(prompt):
        if match["info"].lower() in languages:
            return match["body"].rstrip("\n")
    return None


def _example_value(name: str, schema: dict[str, Any], prompt: str) -> Any:
    if name in _CODE_LANGUAGES:
        return _fenced(prompt, _CODE_LANGUAGES[name]) or _CODE_DEFAULTS[name]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind == "integer":
        return 3
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return (
        prompt[:200] if name in ("text", "prompt", "query", "body", "content") else f"demo {name}"
    )


def _arguments_for(tool: ToolSpec, prompt: str) -> dict[str, Any]:
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    return {
        name: _example_value(name, schema, prompt)
        for name, schema in properties.items()
        if name in required
    }


def _pick_tools(request: ModelRequest, prompt: str) -> list[ToolSpec]:
    """The tools the prompt names (in the prompt's order), else the first tool."""
    lowered = prompt.lower()
    named = [
        (position, spec)
        for spec in request.tools
        for position in [
            max(lowered.find(spec.name.lower()), lowered.find(spec.name.replace("_", " ").lower()))
        ]
        if position >= 0
    ]
    if named:
        return [spec for _, spec in sorted(named, key=lambda item: item[0])]
    return list(request.tools[:1])


def _preview(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def demo_reply(request: ModelRequest) -> Reply:
    """Decide the demo's next reply from the request."""
    messages = request.messages
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        results = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.append(message)
        lines = [
            f"- `{m.name}` {'failed' if m.is_error else 'returned'}: {_preview(content_text(m.content))}"
            for m in reversed(results)
        ]
        return Reply(
            thinking="The tool results are in; I will report them.",
            text="Here is what the tools told me:\n\n"
            + "\n".join(lines)
            + "\n\n*(This answer comes from the built-in demo model: set a provider key "
            "to talk to a real model.)*",
        )
    prompt = content_text(last.content) if isinstance(last, UserMessage) else ""
    if isinstance(last, UserMessage) and not isinstance(last.content, str):
        prompt = " ".join(p.text for p in last.content if isinstance(p, TextPart))
    if request.tool_choice == "none" or not request.tools:
        return Reply(
            thinking="No tools to use here; I will answer directly.",
            text=f"You said: **{_preview(prompt.strip(), 200)}**\n\nI am the demo model, so I can only "
            "echo and use the tools I am given. Set a provider key for real answers.",
        )
    specs = _pick_tools(request, prompt)
    names = " and ".join(f"`{spec.name}`" for spec in specs)
    return Reply(
        thinking=f"The user asks: {_preview(prompt, 120)!r}. {names} should help.",
        text=f"Let me use {names} for that.",
        calls=[Call(spec.name, _arguments_for(spec, prompt)) for spec in specs],
    )


def demo_model(*, chunk_size: int = 6, delay: float = 0.02) -> FunctionModel:
    """The demo model as a stream function (streams in small chunks, like a real one)."""
    return FunctionModel(demo_reply, chunk_size=chunk_size, delay=delay, name=DEMO_MODEL_NAME)
