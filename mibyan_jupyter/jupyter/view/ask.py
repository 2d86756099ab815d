"""Asking the user: a question with choices on the cell's live view, awaited by the kernel.

Built once for every question the kernel has to put while a cell runs: what to do with a
session another kernel holds (fork, take over, cancel; docs/architecture.md, "Store"), and
later ``--compact ask``, the budget's "Continue", a clarify tool. It generalizes the
approval card: the view shows a card with one button per choice (and, when asked for, a
text box), a click or a typed answer comes back as an ``answer`` message (checked by the
view: only a waiting card's own values, a text only where the card has a box, once), and
:func:`ask` returns it.

Why a documented default: headless runs (nbclient, nbconvert, papermill) have no front end
to click. As for approvals, the view's front-end code says "rendered" when it is shown; when
it has not within ``headless_wait`` seconds (or the caller knows nobody can click), the
``default`` choice is taken at once, and the card says so ("no front end answered, so
Fork"), so the saved notebook shows what was decided and why
(docs/architecture.md, "Running inside the kernel").

The wait is cut in short slices, as the approval's is, so Kernel > Interrupt stops it at
once (and Stop, which cancels the tool that asks); the card then says it was stopped.
Clicks may arrive on another thread and only resolve the future through
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.view.ops import AnsweredBy, AskChoice, AskText

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.view.live import AgentView

SLICE_S = 0.2
"""How long one wait for a click lasts before looking again (interrupt latency)."""
HEADLESS_WAIT_S = 2.0
TYPED = ""
"""The value of a typed answer (:attr:`Answer.text` holds the text)."""
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Choice:
    """One possible answer: ``value`` is what :func:`ask` returns, ``label`` the button."""

    value: str
    label: str
    detail: str = ""
    """What choosing it does (the button's tooltip)."""


@dataclass(frozen=True, slots=True)
class TextBox:
    """A text box on the card, for an answer the choices do not hold."""

    placeholder: str = "Type an answer, then Enter"
    limit: int = 2_000
    """At most this many characters are taken (the rest is cut)."""


@dataclass(frozen=True, slots=True)
class Answer:
    value: str
    by: AnsweredBy
    """``user`` (a click or a typed answer) or ``default`` (no front end could answer)."""
    text: str | None = None
    """What the user typed (``value`` is then :data:`TYPED`); ``None`` for a click."""


async def ask(
    view: AgentView,
    question: str,
    choices: Sequence[Choice],
    *,
    default: str,
    headless: bool = False,
    headless_wait: float = HEADLESS_WAIT_S,
    text: TextBox | None = None,
) -> Answer:
    """Show ``question`` with ``choices`` (and a text box when ``text``) on ``view`` and
    wait for a click or a typed answer. ``default`` (one of the values) is the answer
    when nobody can click: at once when ``headless``, else when the front end has not
    said "rendered" within ``headless_wait`` seconds."""
    values = [choice.value for choice in choices]
    if default not in values or len(set(values)) != len(values) or TYPED in values:
        raise ValueError(f"default {default!r} must be one of the distinct values {values}")
    labels = {choice.value: choice.label for choice in choices}
    ident = f"ask{next(_ids)}"
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[str, str | None]] = loop.create_future()

    def clicked(ask_id: str, value: str, typed: str | None) -> None:  # any thread
        if ask_id == ident:
            loop.call_soon_threadsafe(_settle, future, (value, typed))

    view.on_answer(clicked)
    cards = [AskChoice(value=c.value, label=c.label, detail=c.detail) for c in choices]
    box = None if text is None else AskText(placeholder=text.placeholder, limit=text.limit)
    view.show_ask(ident, question, cards, default, text=box)
    try:
        if headless or not await _front_end_present(view, headless_wait):
            view.show_answered(ident, default, labels[default], "default")
            return Answer(default, "default")
        while not future.done():
            await asyncio.wait({future}, timeout=SLICE_S)
    except asyncio.CancelledError:  # Stop or Kernel > Interrupt: no answer will come
        view.show_answered(ident, "", "", "stopped")
        raise
    value, typed = future.result()
    view.show_answered(ident, value, labels[value] if typed is None else typed, "user")
    return Answer(value, "user", typed)


def _settle(future: asyncio.Future[tuple[str, str | None]], answer: tuple[str, str | None]) -> None:
    if not future.done():
        future.set_result(answer)


async def _front_end_present(view: AgentView, wait: float) -> bool:
    """Whether the view's front end has said "rendered" (waiting up to ``wait`` s)."""
    if view.rendered:
        return True
    rendered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def said_rendered() -> None:  # any thread
        loop.call_soon_threadsafe(rendered.set)

    view.on_rendered(said_rendered)
    deadline = time.monotonic() + wait
    while not rendered.is_set() and (left := deadline - time.monotonic()) > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rendered.wait(), min(left, SLICE_S))
    return rendered.is_set()
