"""The no-key demo model: a function model that behaves like a small, polite agent.

It needs no provider, so teaching notebooks run on Binder and in CI. It still shows what
matters: thinking, streamed Markdown, a tool call (with arguments made up from the tool's
schema, so a side-effecting tool asks for approval), and an answer built from the result.

Lessons script it through their prompts (notebooks/README.md): the tools a prompt names are
called in the prompt's order; a fenced block is the code, command or cell source to use;
inline code (`` `sales` ``) fills the calls' other string arguments in order (a variable's
name, a path, a cell id); a message that arrives after tool results (steering, while the
agent works) is acknowledged with those results and no new call.
"""

from __future__ import annotations

import re
from typing import Any

from .fakes import Call, FunctionModel, Reply
from .messages import TextPart, ToolMessage, UserMessage, content_text
from .stream import ModelRequest, ToolSpec

DEMO_MODEL_NAME = "demo"


_FENCED = re.compile(r"```[ \t]*(?P<info>[\w+-]*)[^\n]*\n(?P<body>.*?)```", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_TEXT_NAMES = ("text", "prompt", "query", "body", "content")
_CODE_LANGUAGES = {
    "code": ("python", "py", "python3", ""),
    "command": ("sh", "bash", "shell", ""),
    "source": ("python", "py", "python3", "", "markdown", "md"),  # a notebook cell's
}
_CODE_DEFAULTS = {
    "code": 'print("Hello from the demo model!")',
    "command": "echo hello from the demo model",
    "source": "demo source",
}


def _fenced(prompt: str, languages: tuple[str, ...]) -> str | None:
    """The first fenced block of the prompt in one of ``languages`` ("" = no info string):
    the demo runs the code a lesson shows it, so teaching notebooks can script it."""
    for match in _FENCED.finditer(prompt):
        if match["info"].lower() in languages:
            return match["body"].rstrip("\n")
    return None


def _inline_words(prompt: str, tool_names: set[str]) -> list[str]:
    """The prompt's inline code spans outside fenced blocks, tool names left out: the values
    a lesson gives the demo's calls (``describe `sales` ``)."""
    plain = _FENCED.sub("", prompt)
    return [word for word in _INLINE.findall(plain) if word.strip() not in tool_names]


def _example_value(name: str, schema: dict[str, Any], prompt: str, words: list[str]) -> Any:
    if name in _CODE_LANGUAGES:
        return _fenced(prompt, _CODE_LANGUAGES[name]) or _CODE_DEFAULTS[name]
    if schema.get("type") == "string" and name not in _TEXT_NAMES and words:
        return words.pop(0)
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
    return prompt[:200] if name in _TEXT_NAMES else f"demo {name}"


def _arguments_for(tool: ToolSpec, prompt: str, words: list[str]) -> dict[str, Any]:
    """Each required argument, made up; ``words`` (the prompt's inline code) are used up
    in order across the calls of one reply."""
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    return {
        name: _example_value(name, schema, prompt, words)
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


_SIGNATURE = (
    "\n\n*(This answer comes from the built-in demo model: set a provider key "
    "to talk to a real model.)*"
)


def _results_before(messages: list[Any], end: int) -> list[str]:
    """The tool results that end at ``messages[end - 1]``, as report lines in call order."""
    results: list[ToolMessage] = []
    for message in reversed(messages[:end]):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return [
        f"- `{m.name}` {'failed' if m.is_error else 'returned'}: {_preview(content_text(m.content))}"
        for m in reversed(results)
    ]


def _first_line(prompt: str) -> str:
    """The prompt's first line, for an echo in bold: a fenced block inside ``**`` would
    break the Markdown."""
    lines = prompt.strip().splitlines() or [""]
    return _preview(lines[0], 200) + (" …" if len(lines) > 1 else "")


def _rest(prompt: str) -> str:
    """The prompt after its first line, echoed as it was written (below the bold first
    line, so its Markdown — a fenced block, a list — renders as the user wrote it)."""
    rest = "\n".join(prompt.strip().splitlines()[1:]).strip()
    return f"{rest}\n\n" if rest else ""


def _user_text(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return content_text(message.content)
    return " ".join(p.text for p in message.content if isinstance(p, TextPart))


def demo_reply(request: ModelRequest) -> Reply:
    """Decide the demo's next reply from the request."""
    messages = list(request.messages)
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return Reply(
            thinking="The tool results are in; I will report them.",
            text="Here is what the tools told me:\n\n"
            + "\n".join(_results_before(messages, len(messages)))
            + _SIGNATURE,
        )
    prompt = _user_text(last) if isinstance(last, UserMessage) else ""
    if len(messages) > 1 and isinstance(messages[-2], ToolMessage):
        return Reply(  # a message the user sent while the tools ran: steering
            thinking="The user steered me while the tools ran; I will follow that.",
            text=f"You told me while I was working: **{_first_line(prompt)}**\n\n"
            "So I stop here. What the tools told me before that:\n\n"
            + "\n".join(_results_before(messages, len(messages) - 1))
            + _SIGNATURE,
        )
    if request.tool_choice == "none" or not request.tools:
        return Reply(
            thinking="No tools to use here; I will answer directly.",
            text=f"You said: **{_first_line(prompt)}**\n\n{_rest(prompt)}I am the demo model, "
            "so I can only echo and use the tools I am given. Set a provider key for real "
            "answers.",
        )
    specs = _pick_tools(request, prompt)
    words = _inline_words(prompt, {spec.name for spec in request.tools})
    names = " and ".join(f"`{spec.name}`" for spec in specs)
    return Reply(
        thinking=f"The user asks: {_preview(prompt, 120)!r}. {names} should help.",
        text=f"Let me use {names} for that.",
        calls=[Call(spec.name, _arguments_for(spec, prompt, words)) for spec in specs],
    )


def demo_model(*, chunk_size: int = 6, delay: float = 0.02) -> FunctionModel:
    """The demo model as a stream function (streams in small chunks, like a real one)."""
    return FunctionModel(demo_reply, chunk_size=chunk_size, delay=delay, name=DEMO_MODEL_NAME)
