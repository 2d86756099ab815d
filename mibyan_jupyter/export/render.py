"""A transcript as a list of blocks every layout of it is written from.

Why one intermediate form: the notebook, the Markdown export and the static transcript a
cell keeps must say the same thing (who spoke, which code ran with which output, what a tool
returned), and differ only in layout. :func:`blocks` makes every content decision once
(pairing calls with results, truncation, what counts as code that ran); ``notebook.py``,
``markdown.py`` and ``transcript.py`` only lay out.

Nothing here imports nbformat: outputs are plain nbformat v4 dicts.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any, Literal, TypeAlias, assert_never

from pydantic_core import PydanticSerializationError

from mibyan_jupyter.core.messages import (
    MESSAGE_ADAPTER,
    MESSAGES_ADAPTER,
    AssistantMessage,
    Content,
    ImagePart,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    content_text,
)
from mibyan_jupyter.export.fences import clipped, close_open_fence, code_span, fence
from mibyan_jupyter.export.outputs import normalize_output, stream_output
from mibyan_jupyter.secrets import REDACT

RUN_PYTHON = "run_python"
"""The tool whose calls become code cells: Python the agent ran in the user's kernel."""
RESULT_LIMIT = 2_000
ARGS_LIMIT = 1_000
_ONE_LINE = 100  # arguments longer than this as JSON are shown indented


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """What an export says about a session besides its messages, so the export needs no
    store: the store (or a test, or a script) fills it in."""

    id: str
    title: str | None = None
    model: str | None = None
    created_at: float | None = None
    """Seconds since the epoch, like message timestamps."""
    usage: Usage = field(default_factory=Usage)
    """Token totals of the session's model calls."""
    cost: float | None = None
    """Total cost in US dollars; ``None`` when unknown (never 0 for unknown)."""
    notebook_path: str | None = None
    reviewable: str | None = None
    """The admin policy's line that the student's instructors can review the session, as
    the live view's header said it (recorded in the session's config when it was told):
    an export of a reviewable session says so too (docs/architecture.md, "Admin policy")."""


Speaker: TypeAlias = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class Prose:
    """Markdown said by someone: ``label`` is how it is introduced (``You``, ``Assistant``,
    ``Tool `search```); ``body`` is Markdown, not yet sanitized (that happens on the
    finished document, see ``sanitize.py``)."""

    speaker: Speaker
    label: str
    body: str


@dataclass(frozen=True, slots=True)
class Code:
    """Python the agent ran in the kernel, with its outputs as nbformat v4 output dicts."""

    source: str
    outputs: tuple[dict[str, Any], ...]


Block: TypeAlias = Prose | Code


def redacted(messages: Sequence[Message]) -> list[Message]:
    """The transcript with every known secret replaced, in one pass over its JSON.

    Redaction comes first, before anything is truncated (a key cut in half by truncation
    would no longer match), and once: ``REDACT`` reads the environment on every call
    (~20 us), too slow to call per string of a 1,000-message export. Keys are plain
    ASCII tokens, so their JSON form is their text. Tool ``details`` keep only what an
    export reads (a live transcript may hold anything else there).
    """
    kept = [_export_view(m) for m in messages]
    try:
        data = MESSAGES_ADAPTER.dump_json(kept)
    except PydanticSerializationError:  # outputs holding a non-JSON object: use the text
        kept = [m if _serializable(m) else m.model_copy(update={"details": None}) for m in kept]
        data = MESSAGES_ADAPTER.dump_json(kept)
    return MESSAGES_ADAPTER.validate_json(REDACT(data.decode()))


_EXPORTED_DETAILS = ("outputs", "code")
"""The ``details`` an export reads: recorded outputs, and the code a ``run_cell`` ran."""


def _export_view(message: Message) -> Message:
    if not isinstance(message, ToolMessage) or not message.details:
        return message
    kept = {k: message.details[k] for k in _EXPORTED_DETAILS if k in message.details}
    if isinstance(kept.get("code"), str) and message.name != "run_cell":
        del kept["code"]
    return message.model_copy(update={"details": kept or None})


def _serializable(message: Message) -> bool:
    try:
        MESSAGE_ADAPTER.dump_json(message)
    except PydanticSerializationError:
        return False
    return True


def redacted_meta(session: SessionMeta) -> SessionMeta:
    """``session`` with its free-text fields redacted (a title is the user's first prompt)."""

    def clean(value: str | None) -> str | None:
        return None if value is None else REDACT(value)

    return dataclasses.replace(
        session,
        id=REDACT(session.id),
        title=clean(session.title),
        model=clean(session.model),
        notebook_path=clean(session.notebook_path),
    )


def blocks(messages: Sequence[Message]) -> list[Block]:
    """The blocks of an (already redacted) transcript, in reading order. A tool call is
    shown where its result arrives, so a call and its output sit together; a call that
    never got a result is shown right after the message that made it."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    calls: dict[str, ToolCall] = {}
    out: list[Block] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append(Prose("system", "System prompt", fence(message.content, "text")))
        elif isinstance(message, UserMessage):
            out.append(Prose("user", "You", _user_body(message.content)))
        elif isinstance(message, AssistantMessage):
            body = _assistant_body(message)
            if body:
                out.append(Prose("assistant", "Assistant", body))
            for call in message.tool_calls:
                if call.id in answered:
                    calls[call.id] = call
                else:
                    out.append(_unanswered(call))
        elif isinstance(message, ToolMessage):
            out.append(_tool_block(calls.pop(message.tool_call_id, None), message))
        else:
            assert_never(message)
    return out


def header(session: SessionMeta) -> tuple[str, str]:
    """The title and one Markdown paragraph about the session (model, date, usage, cost)."""
    title = (session.title or "").strip().splitlines()
    usage = session.usage
    total = usage.total or usage.input + usage.output
    facts = [f"Session {code_span(session.id)}"]
    if session.model:
        facts.append(f"model {code_span(session.model)}")
    if session.created_at is not None:
        facts.append(f"started {iso_time(session.created_at, minutes=True)}")
    if session.notebook_path:  # the name only: the folder may name the user
        facts.append(f"in {code_span(PurePath(session.notebook_path).name)}")
    cost = "cost unknown" if session.cost is None else f"cost \\${session.cost:.4f}"
    tokens = f"{usage.input:,} input and {usage.output:,} output tokens ({total:,} total)"
    said = f"{' · '.join(facts)}  \n{tokens} · {cost}"
    if session.reviewable:
        said += f"  \n*{session.reviewable[0].upper()}{session.reviewable[1:]}*"
    return (title[0] if title else "Agent session"), said


def usage_dict(usage: Usage) -> dict[str, int]:
    return usage.model_dump(exclude={"cost"})


def iso_time(seconds: float, *, minutes: bool = False) -> str:
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    if minutes:
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    return moment.isoformat(timespec="seconds")


def _user_body(content: Content) -> str:
    parts = [close_open_fence(content_text(content))]
    images = _image_count(content)
    if images:
        parts.append(f"*({_plural(images, 'image')} not included)*")
    return "\n\n".join(p for p in parts if p.strip()) or "*(empty)*"


def _assistant_body(message: AssistantMessage) -> str:
    parts = [close_open_fence(message.content or "")]
    if message.stop_reason == "aborted":
        parts.append("*(stopped)*")
    elif message.stop_reason == "length":
        parts.append("*(cut off: the reply reached the model's output limit)*")
    elif message.stop_reason == "error":
        kind = f" ({code_span(message.error_kind)})" if message.error_kind else ""
        parts.append(f"**Error**{kind}: {message.error_message or 'the model call failed'}")
    return "\n\n".join(p for p in parts if p.strip())


def _python_code(call: ToolCall) -> str | None:
    """The ``code`` argument of a ``run_python`` call, or ``None`` when it has none."""
    if call.function.name != RUN_PYTHON:
        return None
    try:
        args = json.loads(call.function.arguments)
    except ValueError:
        return None
    code = args.get("code") if isinstance(args, dict) else None
    return code if isinstance(code, str) else None


def _ran(result: ToolMessage) -> bool:
    """Whether a ``run_python`` result shows that the code ran. An error without recorded
    outputs may be a denial, a block or a cancellation: such code is shown, never made a
    code cell, so re-running the notebook never runs code the user refused."""
    details = result.details or {}
    return isinstance(details.get("outputs"), list) or not result.is_error


def _tool_block(call: ToolCall | None, result: ToolMessage) -> Block:
    name = call.function.name if call is not None else (result.name or "tool")
    code = _python_code(call) if call is not None else None
    ran_cell = (result.details or {}).get("code") if name == "run_cell" else None
    if isinstance(ran_cell, str) and _ran(result):  # a notebook cell the agent ran
        return Code(ran_cell, _code_outputs(result))
    if code is not None and _ran(result):
        return Code(code, _code_outputs(result))
    parts = ["*(the call was not recorded)*"] if call is None else [_call_body(call, code)]
    parts.append(_result_body(result))
    return Prose("tool", f"Tool {code_span(name)}", "\n\n".join(parts))


def _unanswered(call: ToolCall) -> Prose:
    note = "*No result was recorded: the call did not run, or its outcome is unknown.*"
    body = f"{_call_body(call, _python_code(call))}\n\n{note}"
    return Prose("tool", f"Tool {code_span(call.function.name)}", body)


def _call_body(call: ToolCall, code: str | None) -> str:
    if code is not None:
        return fence(code, "python")
    raw = call.function.arguments
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return clipped(raw, "text", ARGS_LIMIT)
    if args == {}:
        return "*(no arguments)*"
    text = json.dumps(args, ensure_ascii=False)
    if len(text) > _ONE_LINE:
        text = json.dumps(args, indent=2, ensure_ascii=False)
    return clipped(text, "json", ARGS_LIMIT)


def _result_body(result: ToolMessage) -> str:
    text = content_text(result.content)
    label = "**Error:**" if result.is_error else "**Result:**"
    parts = [label, clipped(text, "text", RESULT_LIMIT) if text else "*(empty)*"]
    images = _image_count(result.content)
    if images:
        parts.append(f"*({_plural(images, 'image')} not included)*")
    return "\n\n".join(parts)


def _code_outputs(result: ToolMessage) -> tuple[dict[str, Any], ...]:
    """The outputs the tool recorded in nbformat form, else its text as stdout and its
    images as displays."""
    recorded = (result.details or {}).get("outputs")
    if isinstance(recorded, list):
        return tuple(o for o in map(normalize_output, recorded) if o is not None)
    outputs: list[dict[str, Any]] = []
    text = content_text(result.content)
    if text:
        outputs.append(stream_output("stdout", text))
    if not isinstance(result.content, str):
        for part in result.content:
            image = _image_output(part) if isinstance(part, ImagePart) else None
            if image is not None:
                outputs.append(image)
    return tuple(outputs)


def _image_output(part: ImagePart) -> dict[str, Any] | None:
    match = re.fullmatch(r"data:(image/(?:png|jpeg|gif));base64,(.*)", part.image_url.url, re.S)
    if match is None:
        return None
    return {"output_type": "display_data", "data": {match[1]: match[2]}, "metadata": {}}


def _image_count(content: Content) -> int:
    return 0 if isinstance(content, str) else sum(isinstance(p, ImagePart) for p in content)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
