"""The contract between the loop and a model: a request in, normalized stream events out.

A stream function gets a :class:`ModelRequest` and an :class:`AbortSignal` and returns
either an async iterator of :data:`StreamEvent` (streaming) or an awaitable
:class:`AssistantMessage` (non-streaming). It never raises for request, network or model
failures: those end the stream with :class:`StreamError` carrying an assistant message
whose stop reason is ``error`` or ``aborted`` (pi's stream-function contract). Deltas carry
only the new text, so the cost of a reply stays linear in its length.

Retry and fallback notices from a provider travel in the same stream so the loop can pass
them on to the UI as agent events. A notice means the reply starts over: deltas streamed
before it are discarded (the loop resets its partial message; a view clears its text).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from .messages import AssistantMessage, Message, ToolCall
from .notices import FallbackNotice, RetryNotice
from .signal import AbortSignal

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StreamStart(_Event):
    type: Literal["start"] = "start"
    model: str | None = None
    api: str | None = None


class TextStart(_Event):
    type: Literal["text_start"] = "text_start"


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    delta: str


class TextEnd(_Event):
    type: Literal["text_end"] = "text_end"


class ThinkingStart(_Event):
    type: Literal["thinking_start"] = "thinking_start"


class ThinkingDelta(_Event):
    type: Literal["thinking_delta"] = "thinking_delta"
    delta: str


class ThinkingEnd(_Event):
    type: Literal["thinking_end"] = "thinking_end"
    signature: str | None = None
    encrypted: str | None = None
    redacted: bool = False


class ToolCallStart(_Event):
    type: Literal["toolcall_start"] = "toolcall_start"
    index: int
    id: str
    name: str


class ToolCallDelta(_Event):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    index: int
    delta: str
    """A fragment of the arguments' JSON text."""
    arguments: Any = None
    """The arguments parsed so far (a JSON prefix, see ``core/_run/partial_json.py``), for
    live display only; the loop fills it in when the stream function leaves it out."""


class ToolCallEnd(_Event):
    type: Literal["toolcall_end"] = "toolcall_end"
    index: int
    call: ToolCall


class StreamDone(_Event):
    type: Literal["done"] = "done"
    message: AssistantMessage


class StreamError(_Event):
    type: Literal["error"] = "error"
    message: AssistantMessage
    """Stop reason ``error`` or ``aborted``; ``error_message`` says what happened."""


StreamEvent: TypeAlias = Annotated[
    StreamStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamDone
    | StreamError
    | RetryNotice
    | FallbackNotice,
    Field(discriminator="type"),
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call. ``messages`` is the loop's live model view, valid for the duration of
    the call (copy it with ``list()`` to keep it): handing over the list instead of a copy
    keeps a turn's cost independent of the history length."""

    model: str
    system_prompt: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None
    tool_choice: Literal["auto", "none"] = "auto"
    options: dict[str, Any] = field(default_factory=dict)


StreamFn: TypeAlias = Callable[
    [ModelRequest, AbortSignal], AsyncIterator[StreamEvent] | Awaitable[AssistantMessage]
]
