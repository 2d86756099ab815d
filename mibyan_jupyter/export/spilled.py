"""Spilled tool results inlined into an export.

Why: a tool result over the spill limit stands in the transcript as a preview (head,
tail, size, an id; ``ToolMessage.details["spilled"]``), which is what the model saw. An
export is for people and for re-running, so it carries the full text again, looked up by
the caller (the store's ``tool_results`` table; exports do not import the store). A result
the lookup does not find keeps its preview.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mibyan_jupyter.core.messages import Message, ToolMessage
from mibyan_jupyter.core.results import SPILL_DETAILS_KEY

FullText = Callable[[str], str | None]
"""The full text of a result id (``None``: not found)."""


def spilled_id(message: Message) -> str | None:
    """The result id of a spilled tool result, ``None`` for any other message."""
    if not isinstance(message, ToolMessage) or not message.details:
        return None
    spilled = message.details.get(SPILL_DETAILS_KEY)
    if isinstance(spilled, dict) and isinstance(spilled.get("id"), str):
        return str(spilled["id"])
    return None


def inline_spilled(messages: Sequence[Message], full_text: FullText) -> list[Message]:
    """``messages`` with each spilled result's preview replaced by its full text."""
    inlined: list[Message] = []
    for message in messages:
        result_id = spilled_id(message)
        text = full_text(result_id) if result_id is not None else None
        if text is not None and isinstance(message, ToolMessage):
            message = message.model_copy(update={"content": text})
        inlined.append(message)
    return inlined
