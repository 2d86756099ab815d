"""A cheap, cached token estimate of a transcript, calibrated by what the provider reports.

Why an estimate: the real tokenizers are per model, large, and (tiktoken) need a download
this project cannot assume; the loop needs a number before every call only to decide
whether to compress, where being off by 10 % costs nothing and a real overflow is caught
anyway (the provider's ``context_overflow`` reply triggers a compaction and one retry).
Why calibrated: after each reply the provider reports the prompt's real input tokens; the
ratio of that to our estimate (clamped, smoothed) corrects the heuristic for the model's
tokenizer and the language of the conversation (docs/architecture.md, "Context
compression").

Why cached: the estimate runs before every model call of a session that may hold thousands
of messages; each message is measured once (messages are immutable) and the total is kept
as a running sum, so a call costs O(new messages).
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import AssistantMessage, ImagePart, Message, TextPart, ToolMessage, UserMessage

CHARS_PER_TOKEN = 3.6
"""English prose and code average 3.5-4 characters per token in the common tokenizers."""
MESSAGE_OVERHEAD = 4
"""Role markers and separators every message costs."""
IMAGE_TOKENS = 800
"""A typical image part (providers charge by tiles; ~800 tokens for a plot)."""
MIN_RATIO, MAX_RATIO = 0.5, 3.0


def _text_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1 if text else 0


def _content_tokens(content: object) -> int:
    if isinstance(content, str):
        return _text_tokens(content)
    total = 0
    for part in content if isinstance(content, list | tuple) else ():
        if isinstance(part, TextPart):
            total += _text_tokens(part.text)
        elif isinstance(part, ImagePart):
            total += IMAGE_TOKENS
    return total


def message_tokens(message: Message) -> int:
    """The estimated tokens of one message as a provider would count it in a prompt."""
    total = MESSAGE_OVERHEAD
    if isinstance(message, AssistantMessage):
        total += _text_tokens(message.content or "")
        for call in message.tool_calls:
            total += _text_tokens(call.function.name) + _text_tokens(call.function.arguments) + 8
        total += sum(_text_tokens(t.text) for t in message.thinking)
    elif isinstance(message, UserMessage | ToolMessage):
        total += _content_tokens(message.content)
    else:
        total += _text_tokens(message.content)
    return total


class TokenCounter:
    """The estimated prompt tokens of a growing transcript, measured once per message.

    The transcript is append-only between compactions; :meth:`count` checks the ends of
    the cached prefix by identity and measures only what is new. A list whose ends differ is
    walked to find the common prefix; a compaction (which keeps both ends and replaces the
    middle) calls :meth:`reset`."""

    __slots__ = ("_measured", "_sums", "ratio")

    def __init__(self) -> None:
        self._measured: list[Message] = []
        self._sums: list[int] = [0]
        self.ratio = 1.0
        """Reported / estimated, from the last calibrations (1.0 until the first)."""

    def reset(self) -> None:
        """Forget what was measured (after a compaction replaced the middle of the list)."""
        self._measured.clear()
        del self._sums[1:]

    def _raw(self, messages: Sequence[Message]) -> int:
        known = len(self._measured)
        appended_only = (
            known <= len(messages)
            and known > 0
            and self._measured[0] is messages[0]
            and self._measured[-1] is messages[known - 1]
        )
        if not appended_only:  # replaced or rewritten: find how much is still the same
            known = 0
            limit = min(len(self._measured), len(messages))
            while known < limit and self._measured[known] is messages[known]:
                known += 1
            del self._measured[known:]
            del self._sums[known + 1 :]
        for message in messages[known:]:
            self._measured.append(message)
            self._sums.append(self._sums[-1] + message_tokens(message))
        return self._sums[len(messages)]

    def count(self, messages: Sequence[Message], system_prompt: str = "") -> int:
        """Estimated input tokens of a request with ``system_prompt`` and ``messages``."""
        raw = self._raw(messages) + _text_tokens(system_prompt) + MESSAGE_OVERHEAD
        return int(raw * self.ratio)

    def calibrate(self, estimated: int, reported: int) -> None:
        """Correct the estimate by a provider's report of the same prompt's input tokens
        (smoothed, so one odd report cannot swing it; clamped to a sane range)."""
        if estimated <= 0 or reported <= 0:
            return
        observed = reported / (estimated / self.ratio)
        blended = 0.5 * self.ratio + 0.5 * observed
        self.ratio = min(MAX_RATIO, max(MIN_RATIO, blended))
