"""Notices a provider or a context manager emits while the loop runs: retries, failovers,
compactions. They are defined in the core so the event union is complete and every
subscriber (the view, the store) can handle them exhaustively; the providers and the
compression step produce them.

A retried or failed-over attempt was still billed: the tokens it used before it failed (a
stream cut off after the prompt was read, a reply with only reasoning that is asked again)
travel in the notice's ``usage``, so the budget and the usage ledger count every attempt,
not only the reply that is kept."""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from .messages import Message, Usage

CompactionReason: TypeAlias = Literal["preflight", "aggressive", "overflow", "manual"]


class _Notice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RetryNotice(_Notice):
    """A model call failed and will be tried again after ``delay`` seconds."""

    type: Literal["retry"] = "retry"
    attempt: int
    max_attempts: int
    delay: float
    error_kind: str
    message: str
    model: str | None = None
    """The model the failed attempt went to (the provider's model id)."""
    usage: Usage | None = None
    """What the failed attempt used, priced (``cost`` ``None`` when the price is unknown);
    ``None`` when it used nothing that is known (an HTTP error before any stream)."""


class FallbackNotice(_Notice):
    """The request moved to the next model of the fallback chain."""

    type: Literal["fallback"] = "fallback"
    from_model: str
    to_model: str
    reason: str
    usage: Usage | None = None
    """What the last attempt on ``from_model`` used before it failed for good (earlier
    attempts were announced, with their usage, by retry notices)."""


class CompactionNotice(_Notice):
    """Older messages were summarised to fit the context window."""

    type: Literal["compaction"] = "compaction"
    messages_before: int
    messages_after: int
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str = ""
    reason: CompactionReason = "preflight"
    summarised: int = 0
    """Messages replaced by the summary."""
    kept_head: int = 0
    """Messages kept at the start (up to the first user message)."""
    kept_tail: int = 0
    """Messages kept at the end."""
    messages: tuple[Message, ...] = ()
    """The compacted transcript, for the store's child session."""
    usage: Usage | None = None
    """What the summary call used (counted in the budget; a ledger row of its own)."""


class NoteNotice(_Notice):
    """Ephemeral notes sent with one request (budget warnings, context pressure, the
    caller's notes): shown as notices, never stored as messages (docs/architecture.md,
    "Prompt builder")."""

    type: Literal["notes"] = "notes"
    notes: tuple[str, ...]
