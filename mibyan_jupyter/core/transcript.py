"""What the model is allowed to see: the alternation rules and an incremental model view.

Providers reject transcripts that break role alternation or leave a tool call without its
result, and they do it with unhelpful 400s. So the rules are checked here, before every
model call, and the error names the offending index.

The rules (Hermes' strict alternation, with tool results filling the user's slot):

* a system message may only be first;
* after it, the first message is a user message; user and assistant then alternate;
* an assistant message with tool calls is followed by exactly one tool result per call id
  (in any order) before anything else; after the results comes the assistant or a user;
* only tool messages may repeat.

Checking is incremental: :class:`ModelView` keeps the model-facing list and validator state
and only looks at what was appended since, so the cost per turn does not grow with the
length of the history (a full re-scan per turn is what makes other loops quadratic).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

from .messages import (
    AssistantMessage,
    Content,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)


class TranscriptError(ValueError):
    """A transcript that no provider would accept; ``index`` points at the culprit."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"invalid transcript at index {index}: {reason}")
        self.index = index
        self.reason = reason


class _State(Enum):
    START = "start"
    AFTER_SYSTEM = "after_system"
    AFTER_USER = "after_user"
    AFTER_ASSISTANT = "after_assistant"
    AWAITING_RESULTS = "awaiting_results"
    AFTER_RESULTS = "after_results"


class AlternationValidator:
    """A state machine fed one message at a time; raises :class:`TranscriptError`."""

    __slots__ = ("_call_index", "_pending", "_state")

    def __init__(self) -> None:
        self._state = _State.START
        self._pending: dict[str, str] = {}
        self._call_index = -1

    def feed(self, message: Message, index: int) -> None:
        state = self._state
        if isinstance(message, ToolMessage):
            self._feed_tool(message, index)
            return
        if state is _State.AWAITING_RESULTS:
            missing = ", ".join(sorted(self._pending))
            raise TranscriptError(
                index,
                f"{message.role} message before the results of the tool calls of the "
                f"assistant message at index {self._call_index} (missing: {missing})",
            )
        if isinstance(message, SystemMessage):
            if state is not _State.START:
                raise TranscriptError(index, "a system message may only come first")
            self._state = _State.AFTER_SYSTEM
        elif isinstance(message, UserMessage):
            if state in (_State.AFTER_USER,):
                raise TranscriptError(index, "two user messages in a row (roles must alternate)")
            self._state = _State.AFTER_USER
        else:
            if state in (_State.START, _State.AFTER_SYSTEM):
                raise TranscriptError(
                    index, "the first message after the system prompt must be a user message"
                )
            if state is _State.AFTER_ASSISTANT:
                raise TranscriptError(
                    index, "two assistant messages in a row (roles must alternate)"
                )
            self._feed_assistant(message, index)

    def _feed_assistant(self, message: AssistantMessage, index: int) -> None:
        if not message.tool_calls:
            self._state = _State.AFTER_ASSISTANT
            return
        pending: dict[str, str] = {}
        for call in message.tool_calls:
            if call.id in pending:
                raise TranscriptError(index, f"duplicate tool call id {call.id!r}")
            pending[call.id] = call.function.name
        self._pending = pending
        self._call_index = index
        self._state = _State.AWAITING_RESULTS

    def _feed_tool(self, message: ToolMessage, index: int) -> None:
        if self._state is not _State.AWAITING_RESULTS:
            raise TranscriptError(
                index,
                f"tool result {message.tool_call_id!r} does not follow an assistant tool call",
            )
        if self._pending.pop(message.tool_call_id, None) is None:
            raise TranscriptError(
                index,
                f"tool result for unknown or already answered call id {message.tool_call_id!r} "
                f"(assistant message at index {self._call_index})",
            )
        if not self._pending:
            self._state = _State.AFTER_RESULTS

    def check_complete(self) -> None:
        """Raise if the last assistant message's tool calls are not all answered."""
        if self._state is _State.AWAITING_RESULTS:
            missing = ", ".join(sorted(self._pending))
            raise TranscriptError(
                self._call_index, f"tool calls without results at the end (missing: {missing})"
            )

    def check_ready(self, length: int) -> None:
        """Raise unless a model call may follow: the last message is a user message or
        completes a batch of tool results."""
        if self._state in (_State.AFTER_USER, _State.AFTER_RESULTS):
            return
        if self._state is _State.AWAITING_RESULTS:
            missing = ", ".join(sorted(self._pending))
            raise TranscriptError(
                self._call_index, f"tool calls without results at the end (missing: {missing})"
            )
        if self._state is _State.AFTER_ASSISTANT:
            raise TranscriptError(length - 1, "the transcript ends with an assistant message")
        raise TranscriptError(max(length - 1, 0), "no user message to answer")


def merge_contents(first: Content, second: Content) -> Content:
    """Join two user contents (used when consecutive user messages are merged)."""
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    left = (TextPart(text=first),) if isinstance(first, str) else first
    right = (TextPart(text=second),) if isinstance(second, str) else second
    return left + right


class ModelView:
    """The model-facing transcript, kept in step with the full one by appending.

    Aborted and failed assistant messages are kept in the full transcript for display but
    left out here; a user message that would follow another user message (because such a
    reply was left out, or because several queued messages were delivered at once) is
    merged into it. ``messages`` is only ever appended to, except that merge, so a model
    call can be handed the list itself instead of a copy.
    """

    __slots__ = ("_validator", "messages")

    def __init__(self, messages: Iterable[Message] = (), *, start_index: int = 0) -> None:
        self.messages: list[Message] = []
        self._validator = AlternationValidator()
        for offset, message in enumerate(messages):
            self.append(message, start_index + offset)

    def append(self, message: Message, index: int) -> None:
        """Add transcript message number ``index``; raises :class:`TranscriptError`."""
        if isinstance(message, AssistantMessage) and not message.sendable:
            return
        last = self.messages[-1] if self.messages else None
        if isinstance(message, UserMessage) and isinstance(last, UserMessage):
            self.messages[-1] = last.model_copy(
                update={"content": merge_contents(last.content, message.content)}
            )
            return
        self._validator.feed(message, index)
        self.messages.append(message)

    def check_ready(self) -> None:
        self._validator.check_ready(len(self.messages))

    def check_complete(self) -> None:
        self._validator.check_complete()


def validate_transcript(messages: Sequence[Message], *, ready_for_model: bool = False) -> None:
    """Check a whole transcript as sent (no merging, no filtering); used on external input.

    ``ready_for_model`` also requires the transcript to end where a model call may follow.
    """
    validator = AlternationValidator()
    for index, message in enumerate(messages):
        validator.feed(message, index)
    if ready_for_model:
        validator.check_ready(len(messages))


def check_history(messages: Sequence[Message]) -> None:
    """Accept a transcript as a conversation to continue: its sendable view (aborted and
    failed replies left out, as the model will see it) must follow the rules, and no tool
    call may be left without a result. Raises :class:`TranscriptError`."""
    view = ModelView(messages)
    view.check_complete()


def unique_call_id(wire_id: str, taken: set[str]) -> str:
    """``wire_id``, or, when an earlier call of the same reply already has it (DeepSeek,
    GLM and Kimi servers send ``call_0`` twice), ``wire_id-2``, ``-3``...; added to
    ``taken``. Why at parse time: each call must run once, get its own result and its own
    audit row, and the next request must pair every result with one call. The suffix
    uses only characters every API accepts in an id (Anthropic allows ``[A-Za-z0-9_-]``)."""
    unique, n = wire_id, 1
    while unique in taken:
        n += 1
        unique = f"{wire_id}-{n}"
    taken.add(unique)
    return unique
