"""Agent events in, view ops out: the live view's state machine.

One method per event kind, dispatched by an exhaustive ``match`` (a new event type fails
the type check here, not silently in the browser); every op is one of :mod:`.ops`' types.
Handling a text delta costs O(delta): only ``event.delta`` is read, never the partial
message the event also carries. User messages are shown as the agent takes them (the
cell's prompt first, then steering and follow-ups): the events are the one source. The
tool and approval half (cards, statuses, live output, pending approvals) is
:class:`.tool_ops.ToolOps`, which this one delegates to.
"""

from __future__ import annotations

import itertools
from typing import Any, assert_never

from mibyan_jupyter.core.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    ApprovalRequested,
    ApprovalResolved,
    BudgetUpdated,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, UserMessage, content_text
from mibyan_jupyter.core.notices import (
    CompactionNotice,
    FallbackNotice,
    NoteNotice,
    RetryNotice,
)
from mibyan_jupyter.core.stream import (
    StreamDone,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from mibyan_jupyter.export.html import markdown_html
from mibyan_jupyter.jupyter.view import texts as fmt
from mibyan_jupyter.jupyter.view.header import ViewHeader
from mibyan_jupyter.jupyter.view.ops import (
    AssistantOp,
    ClearOp,
    DeltaKind,
    FinalOp,
    NoticeLevel,
    NoticeOp,
    UserOp,
)
from mibyan_jupyter.jupyter.view.outbox import Outbox
from mibyan_jupyter.jupyter.view.tool_cards import MessageClock
from mibyan_jupyter.jupyter.view.tool_ops import NO_ARGS, ToolOps
from mibyan_jupyter.jupyter.view.tool_ops import RiskNote as RiskNote  # live.py imports it here
from mibyan_jupyter.secrets import REDACT

_END_NOTES: dict[str, tuple[NoticeLevel, str]] = {
    "aborted": ("info", "Stopped."),
    "length": ("warning", "The reply was cut off: it reached the model's output limit."),
}


class EventOps:
    """The view's state between events: the message being streamed, its calls by stream
    index, the cards shown, the approvals pending (read by the view to validate clicks)."""

    def __init__(self, outbox: Outbox, header: ViewHeader, *, risk_note: RiskNote | None) -> None:
        self._out = outbox
        self._header = header
        self._ids = itertools.count(1)
        self._message: str | None = None
        """The id of the assistant message being streamed."""
        self._calls_by_index: dict[int, str] = {}
        self._streamed_thinking = False
        self._streamed_text = False
        """Text of the message streamed: the outbox rendered it as blocks (no final HTML)."""
        self._tools = ToolOps(outbox, risk_note=risk_note)
        self._message_clock = MessageClock()
        self.pending_approvals = self._tools.pending_approvals
        """The approvals asked and not yet decided (the view validates clicks with it)."""
        self.tool_output = self._tools.output
        """What running tools print (from any thread, see .tool_output); updates too."""
        self.ended = False
        """The run's end was shown (AgentEnd)."""

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case MessageUpdate():
                self._update(event.event)
            case MessageStart():
                if isinstance(event.message, AssistantMessage):
                    self._start_message()
            case MessageEnd():
                self._end_message(event)
            case ToolExecutionStart():
                if event.call_id not in self._tools.cards:
                    self._card(event.call_id, event.name, event.args)
                self._tools.running(event.call_id)
            case ToolExecutionUpdate():
                self._tools.update(event)
            case ToolExecutionEnd():
                self.tool_output.end(event.call_id)  # its last output, before the result
                self._tools.end(event)
            case ApprovalRequested():
                self._tools.approval(event)
            case ApprovalResolved():
                self._tools.resolved(event)
            case BudgetUpdated():
                for op in fmt.budget_ops(event.budgets):
                    self._out.add(op)
            case RetryNotice() | FallbackNotice():
                self._restart_reply()
                self._out.add(fmt.notice_op(event))
            case CompactionNotice():
                self._out.add(fmt.notice_op(event))
            case NoteNotice():
                notes = fmt.notes_op(event)
                if notes is not None:
                    self._out.add(notes)
            case AgentEnd():
                self._agent_end(event)
            case AgentStart() | TurnStart() | TurnEnd():
                pass
            case _:
                assert_never(event)

    # -- assistant messages ---------------------------------------------------------------

    def _start_message(self) -> str:
        ident = f"a{next(self._ids)}"
        self._message = ident
        self._calls_by_index = {}
        self._streamed_thinking = False
        self._streamed_text = False
        self._message_clock.begin(ident)
        self._out.add(AssistantOp(op="assistant", id=ident), now=False)
        return ident

    def _update(self, event: StreamEvent) -> None:
        ident = self._message or self._start_message()
        match event:
            case TextDelta():
                self._streamed_text = self._streamed_text or bool(event.delta)
                self._out.delta("text", ident, event.delta)
            case ThinkingDelta():
                self._streamed_thinking = True
                self._out.delta("thinking", ident, event.delta)
            case TextEnd():
                self._out.end_stream("text", ident)
            case ThinkingEnd():
                self._out.end_stream("thinking", ident)
            case ToolCallStart():
                self._calls_by_index[event.index] = event.id
                self._card(event.id, event.name, NO_ARGS)
            case ToolCallDelta():
                call_id = self._calls_by_index.get(event.index)
                if call_id is not None:
                    self._out.delta("args", call_id, event.delta)
            case ToolCallEnd():
                call = event.call
                self._out.end_stream("args", call.id)
                args = fmt.parsed_args(call.function.arguments)
                self._card(call.id, call.function.name, args)
            case RetryNotice() | FallbackNotice():
                self._restart_reply()
                self._out.add(fmt.notice_op(event))
            case TextStart() | ThinkingStart() | StreamStart() | StreamDone() | StreamError():
                pass
            case _:
                assert_never(event)

    def _end_message(self, event: MessageEnd) -> None:
        message = event.message
        if isinstance(message, UserMessage):
            self._out.add(UserOp(op="user", text=content_text(message.content)))
            return
        if not isinstance(message, AssistantMessage):
            return
        ident = self._message or self._start_message()
        self._message = None
        for kind, key in self._streams(ident):
            self._out.end_stream(kind, key)
        thinking = "\n\n".join(t.text for t in message.thinking if t.text)
        final = FinalOp(
            op="final",
            id=ident,
            # Streamed text was rendered block by block as it came (outbox.py); only a reply
            # sent whole gets its HTML here (redacted before Markdown moves it).
            html="" if self._streamed_text else markdown_html(REDACT(message.content or "")),
            thinking=None if self._streamed_thinking or not thinking else thinking,
        )
        # The hover's stats ride with the final op (one message at the end, not two).
        self._out.add(self._message_clock.stats(ident, message), now=False)
        self._out.add(final)
        for call in message.tool_calls:
            if call.id not in self._tools.cards:
                args = fmt.parsed_args(call.function.arguments)
                self._card(call.id, call.function.name, args, msg=ident)
        usage = message.usage
        context = usage.input + usage.cache_read + usage.cache_write
        if context:
            self._out.add(fmt.bar_op("context", context, self._header.context_window))
        if message.stop_reason == "error":
            text = f"The model call failed: {message.error_message or 'unknown error'}"
            self._out.add(NoticeOp(op="notice", level="error", kind="error", text=text))
        elif message.stop_reason in _END_NOTES:
            level, text = _END_NOTES[message.stop_reason]
            self._out.add(NoticeOp(op="notice", level=level, kind="stop", text=text))

    def _restart_reply(self) -> None:
        """A retry or failover starts the reply over: clear what streamed of it."""
        if self._message is None:
            return
        calls = list(self._calls_by_index.values())
        for kind, key in self._streams(self._message):
            self._out.discard(kind, key)
        self._tools.cards.difference_update(calls)
        self._calls_by_index = {}
        self._streamed_thinking = False
        self._streamed_text = False
        self._out.add(ClearOp(op="clear", id=self._message, calls=calls))

    def _streams(self, ident: str) -> list[tuple[DeltaKind, str]]:
        """The delta streams of message ``ident``: its text, thinking and call arguments."""
        calls: list[tuple[DeltaKind, str]] = [("args", c) for c in self._calls_by_index.values()]
        return [("text", ident), ("thinking", ident), *calls]

    def _card(self, call_id: str, name: str, args: Any, *, msg: str | None = None) -> None:
        self._tools.card(call_id, name, args, msg=msg or self._message)

    def _agent_end(self, event: AgentEnd) -> None:
        if event.reason == "budget_exhausted":
            text = "The budget is used up: the agent stopped after a summary."
            self._out.add(NoticeOp(op="notice", level="warning", kind="budget", text=text))
        self.pending_approvals.clear()
        self.ended = True
        self._tools.run("done")
