"""The Anthropic Messages wire adapter (``anthropic_messages``, ``POST /messages``).

Our history is in OpenAI chat format; Anthropic's differs in ways that make requests fail
rather than degrade, so the conversion is strict about them:

* roles must alternate, so consecutive tool results become *one* user message of
  ``tool_result`` blocks, and a user message right after them joins that message;
* every ``tool_result`` must answer a ``tool_use`` of the assistant message just before, so
  replies we never send (aborted, failed) take their orphaned results with them;
* thinking blocks go back with their signature, unchanged and first; thinking without an
  Anthropic signature (another API's reasoning) cannot be verified by Anthropic and is
  dropped;
* ``max_tokens`` is required, and with extended thinking it must exceed the budget. A
  request that names its ``max_tokens`` (the budget gate's clamp: docs/architecture.md,
  "Budgets") is never sent a larger one: the thinking budget is cut to fit under it, and
  below Anthropic's minimum (1024) the request goes without thinking (logged). Only a
  request that names none gets ``max_tokens`` raised above the thinking budget.

Prompt caching follows Hermes' "system_and_3": a ``cache_control`` breakpoint on the system
prompt and on the last block of each of the last three messages (at most four, Anthropic's
limit), so each turn reads the prefix the previous turn wrote.

A reply that stops with ``pause_turn`` (a long server-tool loop, such as web search) is not
the end of the turn: the API asks for a follow-up request that ends with that reply's
content blocks, exactly as sent (server tool blocks included), and the model goes on. The
adapter of one model call keeps the paused reply (:meth:`AnthropicAdapter.continue_paused`)
so the next body carries it and the next parser continues it; the loop sees one reply.
The continuations share the request's ``max_tokens``: each is sent what the earlier parts
left of it, and none is made once less than :data:`MIN_CONTINUATION_TOKENS` is left, so the
reply's output stays inside the one reservation the gate made for the call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

from mibyan_jupyter.core.messages import (
    Message,
    StopReason,
)
from mibyan_jupyter.core.stream import ModelRequest, ThinkingLevel, ToolSpec
from mibyan_jupyter.providers._anthropic_blocks import json_object, map_stop_reason
from mibyan_jupyter.providers._anthropic_convert import (
    Block,
    WireMessage,
    append_blocks,
    convert_messages,
    mark_cache_breakpoints,
)
from mibyan_jupyter.providers._anthropic_parse import AnthropicParser
from mibyan_jupyter.providers.base import ApiMode
from mibyan_jupyter.providers.notes import add_anthropic_notes

ANTHROPIC_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 8192
ANSWER_ROOM: Final = 4096
"""Tokens left for the answer on top of the thinking budget when ``max_tokens`` is raised."""
THINKING_BUDGETS: Final[dict[ThinkingLevel, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32000,
}
MAX_CONTINUATIONS: Final = 8
"""Follow-up requests of one paused turn; after that the paused reply is kept as it is."""
MIN_THINKING_BUDGET: Final = 1024
"""Anthropic refuses a smaller ``budget_tokens``."""
MIN_CONTINUATION_TOKENS: Final = 256
"""Output tokens a continuation must have left to be worth sending (the gate's floor)."""
_log = logging.getLogger(__name__)
_NOT_WITH_THINKING: Final = ("temperature", "top_k")


class AnthropicAdapter:
    api: ApiMode = "anthropic_messages"
    path: str = "/messages"

    def __init__(self) -> None:
        self._last: AnthropicParser | None = None
        self._paused: AnthropicParser | None = None
        self._continuations = 0
        self._max_tokens: int | None = None  # the request's, shared by its continuations
        self._thinking = False  # the request's first body asked for thinking

    def continue_paused(self) -> bool:
        """After a reply that stopped with ``pause_turn``: make the next request continue
        it (its body ends with the reply's blocks, its parser starts from the reply).
        False when the last reply was not paused, :data:`MAX_CONTINUATIONS` were made, or
        the request's ``max_tokens`` is used up (less than a continuation's worth left,
        or, with thinking on, too little for the minimum thinking budget)."""
        last = self._last
        if last is None or not last.paused or self._continuations >= MAX_CONTINUATIONS:
            return False
        left = self._left(last)
        if left is not None and (
            left < MIN_CONTINUATION_TOKENS
            or (self._thinking and thinking_budget(MIN_THINKING_BUDGET, left) is None)
        ):
            _log.info("pause_turn not continued: %d of max_tokens %s left", left, self._max_tokens)
            return False
        self._paused, self._continuations = last, self._continuations + 1
        return True

    def _left(self, reply: AnthropicParser | None) -> int | None:
        """What the request's ``max_tokens`` leaves after the output of ``reply`` (the
        paused parts so far); ``None``: the request named none."""
        if self._max_tokens is None:
            return None
        return self._max_tokens - (reply.usage.output if reply is not None else 0)

    def forget_paused(self) -> None:
        """The reply starts over (a retry): the next request is the original one."""
        self._paused, self._continuations = None, 0

    def build_body(
        self, request: ModelRequest, model_id: str, *, prompt_caching: bool
    ) -> dict[str, Any]:
        """The streaming request body; ``request.options`` are merged in last, so callers
        can set any field (``top_p``, ``metadata``...) or override ours."""
        system, messages = self.convert_messages(request.system_prompt, request.messages)
        if prompt_caching:
            mark_cache_breakpoints(system, messages)
        # After the breakpoints, so they stay on the transcript and the notes stay outside
        # the cached prefix (docs/architecture.md, "Prompt builder").
        add_anthropic_notes(messages, request.notes)
        if self._paused is not None:  # after the breakpoints: the paused blocks go back as-is
            append_blocks(messages, "assistant", self._paused.content_blocks())
        else:
            self._max_tokens = request.max_tokens
        max_tokens, budget = self._limits(request)
        body: dict[str, Any] = {"model": model_id, "max_tokens": max_tokens, "stream": True}
        if system:
            body["system"] = system
        body["messages"] = messages
        if request.tools:
            body["tools"] = self.convert_tools(request.tools)
            if request.tool_choice == "none":
                body["tool_choice"] = {"type": "none"}
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body.update(request.options)
        if json_object(body.get("thinking")).get("type", "disabled") != "disabled":
            for key in _NOT_WITH_THINKING:  # Anthropic rejects these with thinking on
                body.pop(key, None)
        return body

    def _limits(self, request: ModelRequest) -> tuple[int, int | None]:
        """``(max_tokens, thinking budget)`` of the next body. A named ``max_tokens`` (less
        what paused parts used) is a ceiling the thinking budget is cut to fit under; with
        none, ``max_tokens`` is raised to leave :data:`ANSWER_ROOM` above the budget."""
        wanted = THINKING_BUDGETS.get(request.thinking_level)
        left = self._left(self._paused)
        if left is None:
            max_tokens = DEFAULT_MAX_TOKENS
            if wanted is not None:
                max_tokens = max(max_tokens, wanted + ANSWER_ROOM)
            budget = wanted
        else:
            max_tokens = max(1, left)
            budget = None if wanted is None else thinking_budget(wanted, max_tokens)
            if wanted is not None and budget is None:
                _log.info(
                    "thinking %r not sent: max_tokens %d leaves less than the minimum "
                    "thinking budget (%d) plus room for the answer",
                    request.thinking_level,
                    max_tokens,
                    MIN_THINKING_BUDGET,
                )
        if self._paused is None:
            self._thinking = budget is not None
        return max_tokens, budget

    def convert_messages(
        self, system_prompt: str, messages: Sequence[Message]
    ) -> tuple[list[Block], list[WireMessage]]:
        """``(system blocks, messages)`` (see :func:`._anthropic_convert.convert_messages`)."""
        return convert_messages(system_prompt, messages)

    def convert_tools(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        return [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters or {"type": "object", "properties": {}},
            }
            for tool in tools
        ]

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def new_parser(self, model: str, *, taken: AbstractSet[str] = frozenset()) -> AnthropicParser:
        self._last = AnthropicParser(model, resume=self._paused, taken=taken)
        return self._last

    def map_stop_reason(self, raw: str | None) -> StopReason:
        return map_stop_reason(raw)

    def error_message(self, status: int, body: str) -> tuple[str, str | None]:
        """From ``{"type": "error", "error": {"type": ..., "message": ...}}``; a body in
        another shape (a proxy's HTML page) is returned shortened, as the message."""
        try:
            error = json_object(json_object(json.loads(body)).get("error"))
        except ValueError:
            error = {}
        message = error.get("message")
        error_type = error.get("type")
        if not isinstance(message, str) or not message:
            message = body.strip()[:500] or f"HTTP {status}"
        return message, error_type if isinstance(error_type, str) else None


def thinking_budget(wanted: int, max_tokens: int) -> int | None:
    """The thinking budget that fits under ``max_tokens`` and still leaves the answer
    room (:data:`ANSWER_ROOM`, or half of a smaller ``max_tokens``); ``None`` when that
    is below Anthropic's minimum, :data:`MIN_THINKING_BUDGET`."""
    budget = min(wanted, max_tokens - min(ANSWER_ROOM, max_tokens // 2))
    return budget if budget >= MIN_THINKING_BUDGET else None
