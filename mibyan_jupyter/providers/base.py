"""What every wire adapter provides, and the types they share.

Three wire APIs (``chat_completions``, ``codex_responses``, ``anthropic_messages``) are
spoken by three adapters with the same few functions, so they can be read side by side:

* ``build_body(request)`` -> the JSON body (messages and tools converted, stream on);
* ``convert_messages(...)`` / ``convert_tools(...)`` -> the wire shapes;
* ``new_parser(model, taken=...)`` -> a :class:`StreamParser`, a pure state machine fed one
  decoded SSE event at a time that returns our normalized stream events (``taken``: the
  call ids the conversation already uses, so a reused id is made unique);
* ``map_stop_reason(raw)`` -> our :data:`StopReason`.

Endpoint and credentials are not the adapter's business: they come from the
:class:`~mibyan_jupyter.providers.spec.ModelSpec` (base URL, key), so any OpenAI-compatible
server is configuration, not a new adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from mibyan_jupyter.core.messages import AssistantMessage, Message, StopReason
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent, ToolSpec

ApiMode: TypeAlias = Literal["chat_completions", "codex_responses", "anthropic_messages"]
API_MODES: tuple[ApiMode, ...] = ("chat_completions", "codex_responses", "anthropic_messages")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One decoded server-sent event (``event`` defaults to ``"message"``)."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class StreamParser(Protocol):
    """A per-response state machine. ``feed`` returns the normalized events an SSE event
    produces (often none); it raises :class:`~.errors.ProviderError` for an error the
    server reports inside the stream (``event: error`` after HTTP 200, ``response.failed``).
    ``done`` is true once the terminal event was seen; ``finish()`` returns the final
    message (usage included) and raises ``ProviderError(kind="format_error")`` when the
    stream ended before that. ``partial()`` is the message so far, for aborts."""

    @property
    def done(self) -> bool: ...

    def feed(self, event: SseEvent) -> list[StreamEvent]: ...

    def finish(self) -> AssistantMessage: ...

    def partial(self) -> AssistantMessage: ...


class WireAdapter(Protocol):
    api: ApiMode
    path: str
    """Appended to the base URL: ``/chat/completions``, ``/responses``, ``/messages``."""

    def build_body(
        self, request: ModelRequest, model_id: str, *, prompt_caching: bool
    ) -> dict[str, Any]: ...

    def convert_messages(self, system_prompt: str, messages: Sequence[Message]) -> Any: ...

    def convert_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]: ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def new_parser(self, model: str, *, taken: AbstractSet[str] = frozenset()) -> StreamParser:
        """``taken``: the tool-call ids of the request's assistant messages. A server that
        restarts its ids per reply (Kimi's ``functions.name:0``, ``call_0`` from DeepSeek or
        GLM) would otherwise give a later call an earlier one's id, and the store's audit
        row of the earlier call would be replaced."""
        ...

    def map_stop_reason(self, raw: str | None) -> StopReason: ...

    def error_message(self, status: int, body: str) -> tuple[str, str | None]:
        """(human message, provider error type/code) from an error response body."""
        ...
