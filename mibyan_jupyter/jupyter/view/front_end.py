"""The messages the live view's front end sends back to the kernel, typed.

Every one is untrusted input (a page's script can send anything on the widget's comm):
:mod:`.live` checks each against these shapes and against the view's own state before it
acts. Mirrored in ``static/ops.d.ts``; ``tests/jupyter/view/test_view_ops.py`` keeps the
two in step (docs/architecture.md, "Streaming").
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

from mibyan_jupyter.jupyter.view.ops import Scope, tags


class RenderedMessage(TypedDict):
    """The front end loaded the view: ``next`` is the batch it expects (replay from there)."""

    type: Literal["rendered"]
    next: int


class DecisionMessage(TypedDict):
    """A click on an approval card. Untrusted like every message back: live.py checks it."""

    type: Literal["decision"]
    call_id: str
    action: Literal["approve", "deny"]
    scope: Scope
    reason: str


class DecideAllMessage(TypedDict):
    """A click on "Approve all (N)" or "Deny all": the calls the front end shows waiting.
    Untrusted: live.py decides only the view's own pending calls, each once."""

    type: Literal["decide_all"]
    action: Literal["approve", "deny"]
    call_ids: list[str]
    reason: str


class StopMessage(TypedDict):
    type: Literal["stop"]


class AnswerMessage(TypedDict):
    """A click on an ask card's button, or a typed answer (``choice`` "", ``text``).
    Untrusted: live.py checks the id and the value, takes ``text`` only from a card with
    a text box, cut to its limit, and each card's answer once."""

    type: Literal["answer"]
    ask_id: str
    choice: str
    text: NotRequired[str]


class ExpandMessage(TypedDict):
    """A click on a spilled result's "load": the next chunk from ``offset``. Untrusted:
    live.py only answers for the view's own spilled calls, in chunks it sizes."""

    type: Literal["expand"]
    call_id: str
    offset: int


FrontEndMessage: TypeAlias = (
    RenderedMessage
    | DecisionMessage
    | DecideAllMessage
    | StopMessage
    | AnswerMessage
    | ExpandMessage
)


FRONT_END_TYPES = tags(FrontEndMessage, "type")
