"""Conversation messages in OpenAI chat format, with the extras an agent needs.

Why OpenAI chat format: it is the lingua franca of the three wire APIs we speak and the
format Hermes keeps its history in, so a transcript can be handed to any provider adapter,
stored as-is and returned from ``run_conversation`` without translation. Assistant messages
carry extras (thinking with provider signatures, stop reason, usage, error) that adapters
either round-trip or drop.

Every message is a frozen pydantic model with a literal ``role``; ``MESSAGE_ADAPTER`` is the
one TypeAdapter for the union and doubles as the storage format.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant message ended: the model finished, hit its token limit, asked for
tools, failed, or was stopped by the user."""


def _now() -> float:
    return time.time()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    """A text part of multi-part user or tool content."""

    type: Literal["text"] = "text"
    text: str


class ImageUrl(_Frozen):
    url: str
    """An ``https:`` URL or a ``data:image/...;base64,`` URL."""
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Frozen):
    """An image part (OpenAI ``image_url`` shape); tools return plots this way."""

    type: Literal["image_url"] = "image_url"
    image_url: ImageUrl


ContentPart: TypeAlias = Annotated[TextPart | ImagePart, Field(discriminator="type")]
Content: TypeAlias = str | tuple[ContentPart, ...]


def content_text(content: Content | None) -> str:
    """The text of a content value, image parts left out."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if isinstance(part, TextPart))


class FunctionCall(_Frozen):
    name: str
    arguments: str
    """The arguments exactly as the model produced them: a JSON text, possibly invalid."""


class ToolCall(_Frozen):
    """One tool call requested by an assistant message (OpenAI shape)."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Thinking(_Frozen):
    """A block of model reasoning. ``signature`` (Anthropic) or ``encrypted`` (Responses
    API) must be sent back unchanged on the next request, so both are kept verbatim."""

    text: str = ""
    signature: str | None = None
    encrypted: str | None = None
    redacted: bool = False


class Usage(_Frozen):
    """Token counts of one model call; ``cost`` is ``None`` when the price is unknown
    (never 0, which would hide spending from a cost budget)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    total: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0)
        if cost is not None:
            cost += other.cost or 0.0
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            reasoning=self.reasoning + other.reasoning,
            total=self.total + other.total,
            cost=cost,
        )


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str
    timestamp: float = Field(default_factory=_now)


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: Content
    timestamp: float = Field(default_factory=_now)


class AssistantMessage(_Frozen):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: tuple[Thinking, ...] = ()
    stop_reason: StopReason = "stop"
    usage: Usage = Usage()
    error_message: str | None = None
    error_kind: str | None = None
    """The provider's classification of a failure (``rate_limit``, ``context_overflow``...),
    so a caller can react (compress on overflow) without parsing ``error_message``."""
    model: str | None = None
    api: str | None = None
    timestamp: float = Field(default_factory=_now)

    @property
    def sendable(self) -> bool:
        """Whether this message may go back to a model: aborted and failed replies are
        kept for display but never sent (a partial tool call has no result)."""
        return self.stop_reason not in ("aborted", "error")


class ToolMessage(_Frozen):
    """The result of one tool call. ``is_error`` tells the model (and the UI) that the
    call failed, was blocked or never ran; ``details`` is structured data for the UI
    and the store that the model does not see."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str = ""
    """The tool's name (optional in OpenAI's format; filled in from the call when known)."""
    content: Content
    is_error: bool = False
    details: dict[str, object] | None = None
    timestamp: float = Field(default_factory=_now)


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def to_dict(message: Message) -> dict[str, object]:
    """A JSON-ready dict in OpenAI chat format (plus our extras), ``None`` fields left out."""
    dumped: dict[str, object] = MESSAGE_ADAPTER.dump_python(message, mode="json", exclude_none=True)
    return dumped


def from_dict(data: object) -> Message:
    """Parse a dict (OpenAI chat format) or pass a message model through unchanged."""
    if isinstance(data, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
        return data
    return MESSAGE_ADAPTER.validate_python(data)
