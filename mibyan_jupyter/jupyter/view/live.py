"""``AgentView``: the live view of one ``%%agent`` cell, and its end as a static transcript.

It subscribes to the agent's events (a sync listener on the loop's thread), turns them into
ops (:mod:`.translate`, typed in :mod:`.ops`) and sends them in throttled batches
(:mod:`.outbox`). Every message it shows comes from the agent's events, the cell's prompt
included (one source: nothing is shown ahead and matched up later). Clicks come back as
custom messages, possibly on another thread (kernel subshells): the view only calls the
registered callbacks, the cell's run marshals them onto the loop. When the run ends the
widget's display is replaced (same ``display_id``) by the static transcript, which the
export layer renders (:func:`mibyan_jupyter.export.transcript.render_transcript`), so the
saved notebook shows the conversation with no kernel and no widget state.

Without a front end (nbclient) messages go out and nobody answers: nothing waits for them.
Without IPython at all (plain Python) nothing is displayed and nothing fails.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from mibyan_jupyter.core.approval import Approved, Decision, Denied, Scope
from mibyan_jupyter.core.events import AgentEvent, MessageEnd, ToolExecutionEnd
from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.core.notices import CompactionNotice, NoteNotice
from mibyan_jupyter.core.results import ResultStore
from mibyan_jupyter.export.children import ChildTranscript
from mibyan_jupyter.export.notices import Placed, Seen, place_notices
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript
from mibyan_jupyter.jupyter.view.children import ChildCard, Children, ChildView
from mibyan_jupyter.jupyter.view.header import ViewHeader, WhoAnswered
from mibyan_jupyter.jupyter.view.ops import (
    AnsweredBy,
    AnsweredOp,
    AskChoice,
    AskOp,
    AskText,
    HeaderOp,
    NoticeLevel,
    NoticeOp,
    QueuedOp,
    QueueMode,
    RunOp,
)
from mibyan_jupyter.jupyter.view.outbox import INTERVAL, Outbox
from mibyan_jupyter.jupyter.view.spill import SpillPager
from mibyan_jupyter.jupyter.view.subshells import keep_stop_on_its_subshell
from mibyan_jupyter.jupyter.view.translate import EventOps, RiskNote
from mibyan_jupyter.jupyter.view.widget import AgentWidget

_log = logging.getLogger(__name__)

REASON_LIMIT = 2_000
MAX_BATCH = 256
"""At most this many calls in one "Approve all" (a longer list is cut: untrusted input)."""
_SCOPES: dict[object, Scope] = {"once": "once", "session": "session", "always": "always"}


class AgentView:
    def __init__(
        self,
        header: ViewHeader,
        *,
        risk_note: RiskNote | None = None,
        flush_interval: float = INTERVAL,
    ) -> None:
        self._header = header
        self._widget = AgentWidget()
        self._outbox = Outbox(self._widget.send, interval=flush_interval)
        self._ops = EventOps(self._outbox, header, risk_note=risk_note)
        self._risk_note = risk_note
        self.children = Children()
        """Delegated child agents' nested cards (:meth:`child`)."""
        self._widget.on_msg(self._on_front_end)
        keep_stop_on_its_subshell(getattr(self._widget, "comm", None))  # Stop reaches blocking code
        self._on_decision: list[Callable[[str, Decision], None]] = []
        self._on_stop: list[Callable[[], None]] = []
        self._on_rendered: list[Callable[[], None]] = []
        self._on_answer: list[Callable[[str, str, str | None], None]] = []
        self._asks: dict[str, frozenset[str]] = {}
        """Ask cards still waiting: id -> the values a click may send."""
        self._typed: dict[str, int] = {}
        """Waiting ask cards with a text box: id -> the most characters taken."""
        self._answered: set[str] = set()
        self._pager = SpillPager()
        self._who = WhoAnswered()
        self._lock = threading.Lock()
        self._rendered = False
        self._handle: Any = None
        self._finished = False
        self._last: Message | None = None
        """The message that ended last: where a notice happened."""
        self._notices: list[Seen] = []
        """The receipts and notes shown, for the static transcript (their place in it)."""
        self._waiting: list[Seen] = []
        """Notices whose next message has not ended yet."""
        self._send_header(now=False)

    def _send_header(self, *, now: bool) -> None:
        header = self._header
        op = HeaderOp(
            op="header",
            title=header.title,
            session=header.session_id,
            model=header.model,
            demo=header.demo,
        )
        if header.answered_by is not None:
            op["answered"] = header.answered_by
        if header.reviewable is not None:
            op["reviewable"] = header.reviewable
        self._outbox.add(op, now=now)

    def mark_reviewable(self, line: str) -> None:
        """The header says the conversation is reviewable (the admin policy's line)."""
        if self._header.reviewable != line:
            self._header = dataclasses.replace(self._header, reviewable=line)
            if not self._finished:
                self._send_header(now=True)

    def set_session(self, session_id: str) -> None:
        """The cell goes on in another session (a fork, a compaction's child): the header
        and the final transcript name it."""
        if session_id == self._header.session_id:
            return
        self._header = dataclasses.replace(self._header, session_id=session_id)
        if not self._finished:
            self._send_header(now=True)

    def read_results_from(self, results: ResultStore) -> None:
        """Where a spilled result's card loads its full text from (the session's store)."""
        self._pager.results = results

    # -- the API the cell's run uses --------------------------------------------------------

    def display(self) -> None:
        """Show the live widget in the cell's output (with a display id for finish())."""
        self._outbox.flush()
        if _shell_running() and self._handle is None:
            from IPython.display import display

            self._handle = display(self._widget, display_id=True)  # type: ignore[no-untyped-call]

    def __call__(self, event: AgentEvent) -> None:
        if self._finished:
            return
        self._ops(event)
        if isinstance(event, MessageEnd):
            self._last = event.message
            for seen in self._waiting:
                seen.before = event.message
            self._waiting.clear()
        elif isinstance(event, CompactionNotice | NoteNotice):
            seen = Seen(event, after=self._last)
            self._notices.append(seen)
            self._waiting.append(seen)
        if isinstance(event, ToolExecutionEnd):
            self._pager.see(event.result)
        replied, model = self._who.see(event)
        if replied and model != self._header.answered_by:  # "answered by", or no more
            self._header = dataclasses.replace(self._header, answered_by=model)
            self._send_header(now=True)

    def tool_output(self, call_id: str, stream: Literal["stdout", "stderr"], text: str) -> None:
        """What a running tool printed, from any thread (kernel_tools/live.py's sink): shown
        live on its card, throttled and redacted (.tool_output)."""
        # A delegated child's running call gets it, else our own (.children).
        if not self._finished and not self.children.output(call_id, stream, text):
            self._ops.tool_output.write(call_id, stream, text)

    def child(self, card: ChildCard, on_budget: Callable[[], None] | None = None) -> ChildView:
        """The nested card of a delegated child, for its agent to subscribe; its approvals
        are clicked here, and the parent's bars follow its spend (.children)."""
        child = ChildView(
            self._outbox, self._header, card, self._risk_note, on_budget, self._child_waits
        )
        self.children.add(child)
        return child

    def _child_waits(self) -> None:
        """A child's question opened or closed: the run waits while anyone's is open."""
        waiting = bool(self._ops.pending_approvals) or self.children.waiting()
        if not self._finished:
            self._outbox.add(RunOp(op="run", status="awaiting_approval" if waiting else "running"))

    def on_decision(self, callback: Callable[[str, Decision], None]) -> None:
        self._on_decision.append(callback)

    def on_stop(self, callback: Callable[[], None]) -> None:
        self._on_stop.append(callback)

    def on_rendered(self, callback: Callable[[], None]) -> None:
        """``callback`` runs once, when the front end first says it rendered the view (at
        once if it already has)."""
        with self._lock:
            if not self._rendered:
                self._on_rendered.append(callback)
                return
        _safely(callback)

    @property
    def rendered(self) -> bool:
        return self._rendered

    def show_queued(self, text: str, mode: QueueMode) -> None:
        if not self._finished:
            self._outbox.add(QueuedOp(op="queued", mode=mode, text=text))

    def show_notice(self, text: str, *, level: NoticeLevel = "info") -> None:
        if not self._finished:
            self._outbox.add(NoticeOp(op="notice", level=level, kind="note", text=text))

    # -- ask cards (the awaitable question is .ask.ask) ------------------------------------

    def show_ask(
        self,
        ident: str,
        question: str,
        choices: Sequence[AskChoice],
        default: str,
        *,
        text: AskText | None = None,
    ) -> None:
        """Show an ask card (with a text box when ``text``); a click or a typed answer
        on it reaches the :meth:`on_answer` callbacks once."""
        with self._lock:
            self._asks[ident] = frozenset(choice["value"] for choice in choices)
            if text is not None:
                self._typed[ident] = text["limit"]
        op = AskOp(op="ask", id=ident, question=question, choices=list(choices), default=default)
        if text is not None:
            op["text"] = text
        if not self._finished:
            self._outbox.add(op)

    def show_answered(self, ident: str, choice: str, label: str, by: AnsweredBy) -> None:
        with self._lock:
            self._asks.pop(ident, None)
            self._typed.pop(ident, None)
        if not self._finished:
            self._outbox.add(AnsweredOp(op="answered", id=ident, choice=choice, label=label, by=by))

    def on_answer(self, callback: Callable[[str, str, str | None], None]) -> None:
        """``callback(ask_id, value, text)`` for a click on a waiting ask card (``text``
        ``None``), or a typed answer (``value`` "", ``text`` what was typed); any thread."""
        self._on_answer.append(callback)

    def finish(self, messages: Sequence[Message], *, status: str) -> None:
        """Flush, replace the live display by the static transcript of ``messages``, close
        the widget. Idempotent."""
        if self._finished:
            return
        self._finished = True
        if not self._ops.ended:
            self._outbox.add(RunOp(op="run", status="done"), now=False)
        self.children.end_all("stopped")
        self._ops.tool_output.close()
        self._outbox.close()
        placed = place_notices(messages, self._notices)
        children = self.children.transcripts()  # folded under the calls that started them
        bundle = _transcript_or_note(messages, self._header, status, placed, children)
        if _shell_running():
            from IPython.display import display

            if self._handle is not None:
                self._handle.update(bundle, raw=True)
            else:
                display(bundle, raw=True)  # type: ignore[no-untyped-call]
        self._widget.close()

    # -- messages from the front end (any thread) ------------------------------------------

    def _on_front_end(self, _widget: object, content: object, _buffers: object) -> None:
        if not isinstance(content, Mapping):
            return
        kind = content.get("type")
        if kind == "rendered":
            self._front_end_rendered(content.get("next"))
        elif kind == "decision":
            self._decision(content)
        elif kind == "decide_all":
            self._decide_all(content)
        elif kind == "stop":
            for callback in list(self._on_stop):
                _safely(callback)
        elif kind == "answer":
            self._answer(content.get("ask_id"), content.get("choice"), content.get("text"))
        elif kind == "expand":
            page = self._pager.page(content.get("call_id"), content.get("offset"))
            if page is not None and not self._finished:
                self._outbox.add(page)

    def _answer(self, ident: object, choice: object, text: object) -> None:
        """A click on an ask card: only a waiting card's own values, and only once; a
        typed answer (``choice`` "") only for a waiting card with a text box, its text
        cut to the box's limit (untrusted: it goes to the model as the user's words)."""
        if not isinstance(ident, str) or not isinstance(choice, str):
            return
        typed: str | None = None
        with self._lock:
            if choice == "" and isinstance(text, str) and text.strip() and ident in self._typed:
                typed = text.strip()[: self._typed.pop(ident)]
            elif choice not in self._asks.get(ident, frozenset()):
                return  # a stale card, a second click, or a value the card never offered
            self._typed.pop(ident, None)
            self._asks.pop(ident, None)
        for callback in list(self._on_answer):
            _safely(callback, ident, choice, typed)

    def _front_end_rendered(self, next_seq: object) -> None:
        self._outbox.replay(next_seq if isinstance(next_seq, int) else 0)
        with self._lock:
            self._rendered = True
            callbacks, self._on_rendered = self._on_rendered, []
        for callback in callbacks:
            _safely(callback)

    def _decision(self, content: Mapping[str, Any]) -> None:
        call_id, action = content.get("call_id"), content.get("action")
        if not isinstance(call_id, str) or action not in ("approve", "deny"):
            return
        raw_scope = content.get("scope")
        scope = _SCOPES.get(raw_scope, "once") if isinstance(raw_scope, str) else "once"
        reason = content.get("reason")
        reason = reason.strip()[:REASON_LIMIT] if isinstance(reason, str) else ""
        with self._lock:
            mine = call_id in self._ops.pending_approvals or self.children.pending(call_id)
            if not mine or call_id in self._answered:
                return  # a stale card, or a second click that raced the first
            self._answered.add(call_id)
        decision: Decision = (
            Approved(scope=scope) if action == "approve" else Denied(reason or None, scope=scope)
        )
        for callback in list(self._on_decision):
            _safely(callback, call_id, decision)

    def _decide_all(self, content: Mapping[str, Any]) -> None:
        """The buttons "Approve all (N)" and "Deny all": the same decision, once, for each
        listed call that is one of this view's own pending approvals (others are ignored)."""
        action, call_ids = content.get("action"), content.get("call_ids")
        if action not in ("approve", "deny") or not isinstance(call_ids, list):
            return
        reason = content.get("reason")
        reason = reason.strip()[:REASON_LIMIT] if isinstance(reason, str) else ""
        with self._lock:
            listed = dict.fromkeys(c for c in call_ids[:MAX_BATCH] if isinstance(c, str))
            pending = self._ops.pending_approvals
            chosen = [
                c
                for c in listed
                if (c in pending or self.children.pending(c)) and c not in self._answered
            ]
            self._answered.update(chosen)
        decision: Decision = Approved() if action == "approve" else Denied(reason or None)
        for call_id in chosen:
            for callback in list(self._on_decision):
                _safely(callback, call_id, decision)


def _shell_running() -> bool:
    from IPython.core.interactiveshell import InteractiveShell

    return bool(InteractiveShell.initialized())


def _safely(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        _log.exception("a view callback failed")


def _transcript_or_note(
    messages: Sequence[Message],
    header: ViewHeader,
    status: str,
    notices: Sequence[Placed],
    children: Sequence[ChildTranscript] = (),
) -> dict[str, str]:
    session = SessionMeta(id=header.session_id, title=header.title, model=header.model)
    try:
        return render_transcript(
            messages,
            session=session,
            status=status,
            demo=header.demo,
            notices=notices,
            children=children,
            reviewable=header.reviewable,
        )
    except Exception:  # never leave the cell on a dead widget because of a rendering bug
        _log.exception("the transcript could not be rendered")
        note = f"The agent run ended ({status}); its transcript could not be shown here."
        return {"text/plain": note}
