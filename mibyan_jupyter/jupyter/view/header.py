"""What the view says about the run before any event arrives: the header of the cell.

A plain frozen dataclass (not a pydantic model): it is built by ``run.py`` from values that
are already display-ready (``model`` is a label free of secrets) and never stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from mibyan_jupyter.core.events import AgentEvent, MessageEnd, MessageUpdate
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.notices import FallbackNotice


@dataclass(frozen=True, slots=True)
class ViewHeader:
    title: str
    """The session title ("" for a new session: the view then shows the session id)."""
    session_id: str
    model: str
    """A display label, already free of secrets."""
    demo: bool
    """True when the scripted demo model answers (no provider key): shows the demo badge."""
    context_window: int | None
    """Tokens, for the "context" bar; ``None``: the bar shows usage only."""
    answered_by: str | None = None
    """The model that answered last when a failover chose it (``None``: ``model`` did)."""
    reviewable: str | None = None
    """The admin policy's line that the conversation is reviewable by instructors
    (``None``: it is not; docs/architecture.md, "Admin policy")."""


class WhoAnswered:
    """Which model made each reply, for the header's "answered by" (docs/architecture.md,
    "The model and settings of a resumed session": after a failover the session keeps its
    primary model and the header says which model answered last)."""

    def __init__(self) -> None:
        self._fallback: str | None = None
        """The model a failover moved the reply being made to."""

    def see(self, event: AgentEvent) -> tuple[bool, str | None]:
        """``(True, model)`` after a reply: ``model`` is the fallback that made it, or
        ``None`` when the session's own model did; ``(False, None)`` for other events and
        for a failed reply (it says nothing about who answers)."""
        notice = event.event if isinstance(event, MessageUpdate) else event
        if isinstance(notice, FallbackNotice):
            self._fallback = notice.to_model
            return False, None
        if not isinstance(event, MessageEnd) or not isinstance(event.message, AssistantMessage):
            return False, None
        fallback, self._fallback = self._fallback, None
        message = event.message
        if message.stop_reason in ("error", "aborted"):
            return False, None
        return True, (message.model or fallback) if fallback is not None else None
