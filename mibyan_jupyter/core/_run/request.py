"""What one model call sends: the model-facing messages and the request around them.

Work per turn must not grow with the history's length, so without context hooks the
messages come from an incremental :class:`~mibyan_jupyter.core.transcript.ModelView`, kept
in step as the run appends, and handed to the model without copying. With
``transform_context`` / ``convert_to_llm`` (or a ``prepare_next_turn`` that replaces the
messages), the hooks' output is checked whole before it is sent, since a hook may return
anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mibyan_jupyter.core.config import LoopConfig, TurnUpdate
from mibyan_jupyter.core.messages import AssistantMessage, Message
from mibyan_jupyter.core.notes import DefaultNotes, NoteContext
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest
from mibyan_jupyter.core.transcript import ModelView, TranscriptError, validate_transcript

from .scope import RunScope
from .waiting import maybe_await

_log = logging.getLogger(__name__)


class ModelInput:
    """The messages the next request sends; raises :class:`TranscriptError` when they
    would break the alternation rules (the run turns that into a failed reply)."""

    __slots__ = ("_config", "_error", "_signal", "_transcript", "_view")

    def __init__(self, transcript: list[Message], config: LoopConfig, signal: AbortSignal) -> None:
        self._transcript = transcript
        self._config = config
        self._signal = signal
        self._view: ModelView | None = None
        self._error: TranscriptError | None = None

    def reset(self) -> None:
        """The transcript was replaced in place (a compaction): build the view again."""
        self._view = None
        self._error = None

    def appended(self, message: Message, index: int) -> None:
        """The run appended ``message`` at ``index``: keep the view in step. A break of the
        rules is remembered and raised at the next call, not here (appending never fails)."""
        if self._view is not None and self._error is None:
            try:
                self._view.append(message, index)
            except TranscriptError as error:
                self._error = error

    async def messages(self, override: TurnUpdate | None) -> Sequence[Message]:
        if override is not None and override.messages is not None:
            validate_transcript(override.messages, ready_for_model=True)
            return override.messages
        config = self._config
        if config.transform_context is None and config.convert_to_llm is None:
            if self._view is None:
                self._view = ModelView(self._transcript)
            if self._error is not None:
                raise self._error
            self._view.check_ready()
            return self._view.messages
        messages: Sequence[Message] = self._transcript
        if config.transform_context is not None:
            messages = await maybe_await(config.transform_context(messages, self._signal))
        if config.convert_to_llm is not None:
            converted = await maybe_await(config.convert_to_llm(messages))
            validate_transcript(converted, ready_for_model=True)
            return converted
        view = ModelView(messages)
        view.check_ready()
        return view.messages


def build_request(
    scope: RunScope,
    messages: Sequence[Message],
    override: TurnUpdate | None,
    summary_max_tokens: int | None,
    notes: tuple[str, ...] = (),
) -> ModelRequest:
    """The request for one turn; a summary call (``summary_max_tokens`` set) offers no
    tools and forbids calling any."""
    config = scope.config
    summary = summary_max_tokens is not None
    return ModelRequest(
        model=(override.model if override else None) or config.model,
        system_prompt=scope.context.system_prompt,
        messages=messages,
        tools=() if summary else scope.tools.specs(),
        thinking_level=(override.thinking_level if override else None) or config.thinking_level,
        max_tokens=summary_max_tokens if summary else config.max_tokens,
        tool_choice="none" if summary else "auto",
        options=config.options,
        notes=notes,
    )


async def gather_notes(
    config: LoopConfig, defaults: DefaultNotes, context: NoteContext
) -> tuple[str, ...]:
    """The ephemeral notes of one request: the defaults, then the caller's (a caller's
    function that fails is logged and skipped: a note is never worth a failed call)."""
    notes = list(defaults(context))
    if config.notes is not None:
        try:
            notes += [str(n) for n in await maybe_await(config.notes(context)) if str(n).strip()]
        except Exception:
            _log.exception("the notes function failed; this request goes without its notes")
    return tuple(notes)


def summary_note(used_up: str) -> str:
    """The summary call's instruction: a note on that request, never a stored message."""
    return (
        f"[budget] Budget reached: {used_up}; what is left pays for this one last reply. "
        "Do not call any tools. Reply now with a concise summary of the work so far: "
        "what was done, what was found, and what is left to do."
    )


def summary_text(message: AssistantMessage) -> AssistantMessage:
    """The summary must be a final, non-empty answer: drop tool calls, never return empty."""
    content = message.content
    if not (content and content.strip()):
        why = f" ({message.error_message})" if message.error_message else ""
        content = f"I stopped because the budget is used up, and no summary could be produced{why}."
    stop = "stop" if message.stop_reason in ("tool_use", "stop") else message.stop_reason
    return message.model_copy(update={"content": content, "tool_calls": (), "stop_reason": stop})
