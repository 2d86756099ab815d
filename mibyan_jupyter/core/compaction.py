"""Context compression: where to cut a transcript, and the summary that replaces the middle.

Why this shape (Hermes' compressor, docs/architecture.md, "Context compression"): a session
that outgrows the model's window must go on, so the middle of the conversation is replaced
by one summary written by the model itself, while what the model needs most is kept word
for word: the first user message (the task as stated), the last N messages (what is being
done now), and every tool call together with its result (a call without its result, or a
result without its call, is an invalid request for every provider). Pinned instructions
and memory live in the system prompt, so they are never summarised away.

Pure decisions plus one tool-less model call through the same ``stream_fn``; no I/O. The
loop decides *when* (preflight at 50 % of the window, aggressive at 85 %, and after a
``context_overflow`` reply); the store *subscribes* to the :class:`CompactionNotice` and
opens the child session.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .messages import AssistantMessage, Message, ToolMessage, Usage, UserMessage, content_text
from .notices import CompactionReason
from .signal import AbortSignal
from .stream import ModelRequest, StreamDone, StreamError, StreamFn

KEEP_LAST = 20
PREFLIGHT = 0.50
AGGRESSIVE = 0.85
SUMMARY_MAX_TOKENS = 2_000
SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]"

SUMMARY_INSTRUCTIONS = """\
Summarise the conversation above for yourself: it will replace those messages, so keep \
what you need to carry on. Write in compact Markdown, under these headings:
- Goal: what the user wants overall.
- Decisions and results: what was decided, found or computed (numbers that matter).
- Names: files, variables, functions, columns, models and settings that were used.
- Open questions and next steps.
- Do not: anything the user asked you not to do or not to touch.
Do not call tools. Do not invent anything that was not said."""


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When and how much to compress, for a model with ``window`` tokens of context."""

    window: int
    keep_last: int = KEEP_LAST
    preflight: float = PREFLIGHT
    aggressive: float = AGGRESSIVE

    def due(self, tokens: int, *, between_turns: bool = False) -> bool:
        """Whether a prompt of ``tokens`` should be compressed first: over the preflight
        share before a call; between turns, only over the aggressive share."""
        share = self.aggressive if between_turns else self.preflight
        return tokens > self.window * share


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction is about to do, as ``confirm`` shows it to the user."""

    reason: CompactionReason
    tokens: int
    window: int | None
    summarised: int
    kept_head: int
    kept_tail: int


@dataclass(frozen=True)
class CompactionSettings:
    """How an agent compacts its transcript (docs/architecture.md, "Context compression").

    ``window`` ``None``: the model's window is unknown, so the loop compacts only when the
    provider says the prompt overflowed. ``mode`` ``"ask"`` awaits ``confirm`` first
    (``None``: behaves as ``"auto"``); ``"off"`` never compacts in the loop (an explicit
    ``agent.compact()`` still does). ``before_compaction`` is the memory flush: awaited
    with the messages about to be summarised, so what matters can be written down first."""

    window: int | None
    mode: Literal["auto", "ask", "off"] = "auto"
    keep_last: int = KEEP_LAST
    preflight: float = PREFLIGHT
    aggressive: float = AGGRESSIVE
    confirm: Callable[[CompactionPlan], Awaitable[bool]] | None = None
    before_compaction: Callable[[Sequence[Message]], Awaitable[None]] | None = None

    def due(self, tokens: int, *, between_turns: bool = False) -> bool:
        """Whether ``tokens`` passes the preflight share (between turns: the aggressive
        one); never without a known window."""
        if self.window is None:
            return False
        share = self.aggressive if between_turns else self.preflight
        return tokens > self.window * share


@dataclass(frozen=True, slots=True)
class Cut:
    """``messages[:head]`` and ``messages[tail:]`` are kept; the middle is summarised."""

    head: int
    tail: int

    @property
    def summarised(self) -> int:
        return self.tail - self.head


def plan_cut(messages: Sequence[Message], keep_last: int = KEEP_LAST) -> Cut | None:
    """Where to cut, or ``None`` when there is nothing worth summarising (fewer than two
    messages between the first user message and the kept tail).

    The head is everything up to and including the first user message. The tail starts
    ``keep_last`` messages from the end and moves earlier while it would start on a tool
    result (so each result keeps its call) — never later, so a cut never drops what the
    model is working on."""
    first_user = next((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), None)
    if first_user is None:
        return None
    head = first_user + 1
    tail = max(head, len(messages) - max(keep_last, 1))
    while tail > head and isinstance(messages[tail], ToolMessage):
        tail -= 1
    if tail - head < 2:
        return None
    return Cut(head, tail)


def summary_message(summary: str) -> UserMessage:
    """The message that stands for the summarised middle (a user turn: the model reads it
    as context it was given, and consecutive user messages are merged for the model)."""
    return UserMessage(content=f"{SUMMARY_HEADER}\n\n{summary.strip()}")


def compacted(messages: Sequence[Message], cut: Cut, summary: str) -> list[Message]:
    """The transcript after the cut: head, the summary, tail."""
    return [*messages[: cut.head], summary_message(summary), *messages[cut.tail :]]


def _transcript_text(messages: Sequence[Message]) -> str:
    """The middle as plain text for the summariser (tool results clipped: the summary
    needs what they showed, not every byte)."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.content:
                lines.append(f"assistant: {message.content}")
            lines += [
                f"assistant called {c.function.name}({c.function.arguments[:500]})"
                for c in message.tool_calls
            ]
        elif isinstance(message, ToolMessage):
            text = content_text(message.content)
            clipped = text if len(text) <= 1500 else text[:1000] + " … " + text[-400:]
            lines.append(f"tool {message.name} returned: {clipped}")
        else:
            lines.append(f"{message.role}: {content_text(message.content)}")
    return "\n".join(lines)


def summary_request(model: str, system_prompt: str, middle: Sequence[Message]) -> ModelRequest:
    """A tool-less request asking the model to summarise ``middle``."""
    return ModelRequest(
        model=model,
        system_prompt=system_prompt,
        messages=[
            UserMessage(
                content="Conversation to summarise:\n\n"
                + _transcript_text(middle)
                + "\n\n"
                + SUMMARY_INSTRUCTIONS
            )
        ],
        tools=(),
        max_tokens=SUMMARY_MAX_TOKENS,
        tool_choice="none",
    )


class SummaryFailed(RuntimeError):
    """The summary call failed (its error message says why); nothing was compacted.
    ``usage``: what the failed call still used (it counts in the budget)."""

    def __init__(self, text: str, usage: Usage | None = None) -> None:
        super().__init__(text)
        self.usage = usage


async def summarise(
    stream_fn: StreamFn, request: ModelRequest, signal: AbortSignal
) -> AssistantMessage:
    """Run the summary request through ``stream_fn``; the final message, or
    :class:`SummaryFailed` when the call ends in an error or says nothing."""
    produced = stream_fn(request, signal)
    final: AssistantMessage | None = None
    if inspect.isawaitable(produced):
        final = await produced
    else:
        async for event in produced:
            if isinstance(event, StreamDone | StreamError):
                final = event.message
    if final is None or final.error_message or not (final.content or "").strip():
        why = final.error_message if final is not None else None
        raise SummaryFailed(
            why or "the summary call returned no text", final.usage if final else None
        )
    return final
