"""Ephemeral notes on the wire: one request's notes placed after its transcript.

Why after the transcript and never in the system block: the system block and every message
before the notes must be the bytes the previous request sent, so the provider's prompt cache
(OpenAI's automatic prefix cache, Anthropic's ``cache_control`` breakpoints) keeps hitting
(docs/architecture.md, "Prompt builder"). A note is therefore added to the last user turn
(or as a new user turn after tool results) of this request's body only, and never written
back into the transcript, so a later request without notes carries none.

Each wire API gets the form it accepts: Chat Completions and Responses a trailing user text
(appended to the last user message when the body already ends with one, which keeps chat
templates that insist on alternation happy), Anthropic a text block after the tool results
of the last user turn (tool results must come first in that turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NOTES_HEADER = "[Notes for this request only; they are not part of the conversation]"


def notes_text(notes: Sequence[str]) -> str:
    """The notes as one text, under a header that tells the model what they are; ``""``
    when there is nothing to say (no note, or only empty ones)."""
    kept = [note.strip() for note in notes if note and note.strip()]
    if not kept:
        return ""
    return "\n".join([NOTES_HEADER, *kept])


def add_chat_notes(messages: list[dict[str, Any]], notes: Sequence[str]) -> None:
    """Chat Completions: append the notes to the last user message (a text part or, for
    plain-string content, the string's tail), else add a user message after the tools."""
    text = notes_text(notes)
    if not text:
        return
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user":
        content = last.get("content")
        if isinstance(content, str):
            last["content"] = f"{content}\n\n{text}" if content else text
            return
        if isinstance(content, list):
            content.append({"type": "text", "text": text})
            return
    messages.append({"role": "user", "content": text})


def add_responses_notes(items: list[dict[str, Any]], notes: Sequence[str]) -> None:
    """Responses: an ``input_text`` part in the last user item, else a new user item (after
    ``function_call_output`` items a user message is what the API expects)."""
    text = notes_text(notes)
    if not text:
        return
    part = {"type": "input_text", "text": text}
    last = items[-1] if items else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), list):
        last["content"].append(part)
        return
    items.append({"role": "user", "content": [part]})


def add_anthropic_notes(messages: list[dict[str, Any]], notes: Sequence[str]) -> None:
    """Anthropic: a text block at the end of the last user turn (after its tool results),
    else a new user turn. Called after the cache breakpoints are marked, so the breakpoint
    stays on the last block of the transcript and the notes fall outside the cached prefix."""
    text = notes_text(notes)
    if not text:
        return
    block = {"type": "text", "text": text}
    if messages and messages[-1].get("role") == "user":
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})
