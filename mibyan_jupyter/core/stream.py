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

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from .messages import AssistantMessage, Message, ToolCall
from .notices import FallbackNotice, RetryNotice
from .signal import AbortSignal

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


class LazyFields(_Event):
    """An event some of whose fields are built on first read, then kept.

    Why: the loop passes on one event per delta, and some fields of those events stand for
    the whole reply so far (the partial message of a ``MessageUpdate``, the parsed arguments
    of a ``ToolCallDelta``). Building them per delta made a reply's cost quadratic in its
    length (docs/architecture.md, "Streaming"); most subscribers read only the delta. So
    :meth:`deferring` makes an event whose listed fields are computed when first read (the
    value they had when the event was made: the builders see a mark, not the live state).
    Reading, comparing, hashing, copying and serializing behave as if the fields were set.
    """

    _deferred: Mapping[str, Callable[[], Any]] | None = PrivateAttr(default=None)

    @classmethod
    def deferring(cls, builders: Mapping[str, Callable[[], Any]], **values: Any) -> Self:
        """An event with ``values`` set (unvalidated: the loop's own objects) and the fields
        named in ``builders`` built on first read.

        What ``model_construct`` does, minus its per-field loop (the loop makes one of these
        per delta): the defaults of the other fields are worked out once per class and
        shared, which is safe because an event's defaults are immutable."""
        defaults = _DEFAULTS.get(cls)
        if defaults is None:
            defaults = _DEFAULTS[cls] = {
                name: field.get_default(call_default_factory=True)
                for name, field in cls.model_fields.items()
                if not field.is_required()
            }
        state = defaults | values
        for name in builders:
            state.pop(name, None)
        event = cls.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        object.__setattr__(event, "__pydantic_fields_set__", set(values) | set(builders))
        object.__setattr__(event, "__pydantic_extra__", None)
        object.__setattr__(event, "__pydantic_private__", {"_deferred": builders})
        return event

    def materialize(self) -> Self:
        """Build every deferred field now (what serializing or comparing needs)."""
        for name in tuple(self._deferred or ()):
            getattr(self, name)
        return self

    if not TYPE_CHECKING:  # keep the fields' declared types visible to type checkers

        def __getattr__(self, name: str) -> Any:
            deferred = (self.__pydantic_private__ or {}).get("_deferred")
            if deferred and name in deferred:
                value = deferred[name]()
                self.__dict__[name] = value
                # A new mapping, never a mutation: copies of this event share the old one.
                rest = {k: v for k, v in deferred.items() if k != name}
                self.__pydantic_private__["_deferred"] = rest or None
                return value
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize_built(self, handler: SerializerFunctionWrapHandler) -> Any:
        return handler(self.materialize())

    def __eq__(self, other: object) -> bool:
        self.materialize()
        if isinstance(other, LazyFields):
            other.materialize()
        return super().__eq__(other)

    def __hash__(self) -> int:
        self.materialize()
        return hash((type(self), *(self.__dict__[name] for name in type(self).model_fields)))

    def __repr_args__(self) -> Any:
        self.materialize()
        return [(name, self.__dict__[name]) for name in type(self).model_fields]

    def __getstate__(self) -> dict[Any, Any]:
        return super(LazyFields, self.materialize()).__getstate__()


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


class ToolCallDelta(LazyFields):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    index: int
    delta: str
    """A fragment of the arguments' JSON text."""
    arguments: Any = None
    """The arguments parsed so far (a JSON prefix, see ``core/_run/partial_json.py``), for
    live display only. When the stream function leaves it out the loop defers it: it is
    parsed when first read (one parse of the text so far, so a subscriber that wants live
    arguments should read them at its own pace, not at every delta)."""


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
    notes: tuple[str, ...] = ()
    """Ephemeral notes: each adapter renders them after the transcript, never in the system
    block, and they are never stored (docs/architecture.md, "Prompt builder")."""


StreamFn: TypeAlias = Callable[
    [ModelRequest, AbortSignal], AsyncIterator[StreamEvent] | Awaitable[AssistantMessage]
]
