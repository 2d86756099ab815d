"""What a UI needs to draw an agent at any moment, and the agent's message queues.

Kept apart from :mod:`.agent` so the Agent's module stays about runs and events; the
state is a plain record the loop works on in place (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ._run.sanitize import clean_prompt
from .events import MessageUpdate
from .messages import AssistantMessage, Message, UserMessage
from .safe_text import clean_text
from .stream import ThinkingLevel
from .tools import ToolRegistry

QueueMode: TypeAlias = Literal["one-at-a-time", "all"]


@dataclass
class AgentState:
    """What a UI needs to draw the agent at any moment."""

    system_prompt: str = ""
    model: str = "demo"
    thinking_level: ThinkingLevel = "off"
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    messages: list[Message] = field(default_factory=list)
    is_running: bool = False
    pending_tool_calls: set[str] = field(default_factory=set)
    error: str | None = None
    last_end_reason: str | None = None
    _streaming: MessageUpdate | AssistantMessage | None = field(
        default=None, init=False, repr=False
    )

    @property
    def streaming_message(self) -> AssistantMessage | None:
        """The assistant message being streamed, as of the last update; built when read
        (the update defers it), so tracking it costs nothing per delta."""
        source = self._streaming
        return source.message if isinstance(source, MessageUpdate) else source

    @streaming_message.setter
    def streaming_message(self, message: AssistantMessage | None) -> None:
        self._streaming = message

    def stream_update(self, update: MessageUpdate) -> None:
        """Follow the streamed message through ``update`` without building it."""
        self._streaming = update


def as_user(message: str | Message) -> Message:
    """Prompt text as a user message, made valid Unicode where it enters."""
    if isinstance(message, str):
        return UserMessage(content=clean_text(message))
    return clean_prompt(message)


class MessageQueue:
    """Messages waiting for the run (steering or follow-up), drained per ``mode``."""

    __slots__ = ("items", "mode")

    def __init__(self, mode: QueueMode) -> None:
        self.items: deque[Message] = deque()
        self.mode: QueueMode = mode

    def drain(self) -> list[Message]:
        if not self.items:
            return []
        if self.mode == "one-at-a-time":
            return [self.items.popleft()]
        drained = list(self.items)
        self.items.clear()
        return drained
