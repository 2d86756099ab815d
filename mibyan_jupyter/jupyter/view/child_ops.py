"""The live view's ops for a delegated child agent's nested card, typed apart from
:mod:`.ops` (which puts them in its unions, so they are part of the one protocol and of
its mirror ``static/ops.d.ts``) to keep that module short.

A child's own ops are the ordinary ones from a translator of its own (:mod:`.children`):
its ids are scoped ``<child id>/<id>``, and the ops that make an element (user,
assistant, tool, notice) carry ``child``: the front end makes the element inside the
child's card (``static/children.js``; docs/architecture.md, "Streaming").
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from typing_extensions import TypedDict

ChildStatus: TypeAlias = Literal[
    "running", "awaiting_approval", "completed", "stopped", "budget_exhausted", "error"
]
"""A delegated child's state: running (or waiting for a click), then how its run ended."""


class ChildStartOp(TypedDict):
    """A delegated child agent starts (``delegate_task``): a collapsible card nested in the
    parent's call card ``parent``. The child's own ops carry ``child: id`` where they make
    an element, and ids scoped as ``<id>/<its id>`` (see :mod:`.children`)."""

    op: Literal["child_start"]
    id: str
    parent: str
    """The parent's ``delegate_task`` call, whose card holds the child's."""
    goal: str
    tools: list[str]
    max_turns: int


class ChildStatusOp(TypedDict):
    """A delegated child's state and spend so far (its own turns, tokens and cost)."""

    op: Literal["child_status"]
    id: str
    status: ChildStatus
    turns: int
    tokens: int
    cost: float | None
    """``None``: a price is unknown."""
