"""What the view says about the run before any event arrives: the header of the cell.

A plain frozen dataclass (not a pydantic model): it is built by ``run.py`` from values that
are already display-ready (``model`` is a label free of secrets) and never stored.
"""

from __future__ import annotations

from dataclasses import dataclass


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
