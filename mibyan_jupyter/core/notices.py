"""Notices a provider or a context manager emits while the loop runs: retries, failovers,
compactions. They are defined in the core so the event union is complete and every
subscriber (the view, the store) can handle them exhaustively; the providers and the
compression step produce them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


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


class FallbackNotice(_Notice):
    """The request moved to the next model of the fallback chain."""

    type: Literal["fallback"] = "fallback"
    from_model: str
    to_model: str
    reason: str


class CompactionNotice(_Notice):
    """Older messages were summarised to fit the context window."""

    type: Literal["compaction"] = "compaction"
    messages_before: int
    messages_after: int
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str = ""
