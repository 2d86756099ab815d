"""The tool and approval half of the live view's state machine (:mod:`.translate`'s
:class:`~.translate.EventOps` delegates here): a call's card, its status and timing, the
chunks of output it streams, its approval card and decision, and the approvals still
pending (the view validates clicks against them).

Kept apart from the message half so each stays short; the ops are :mod:`.ops`' types,
what the cards say beyond the events is :mod:`.tool_cards`' (docs/architecture.md,
"Streaming").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mibyan_jupyter.core.events import (
    ApprovalRequested,
    ApprovalResolved,
    ToolExecutionEnd,
    ToolExecutionUpdate,
)
from mibyan_jupyter.jupyter.view import texts as fmt
from mibyan_jupyter.jupyter.view.media import tool_images
from mibyan_jupyter.jupyter.view.ops import (
    ApprovalOp,
    DecidedOp,
    RunOp,
    RunStatus,
    StatusOp,
    ToolOp,
    ToolStatus,
)
from mibyan_jupyter.jupyter.view.outbox import Outbox
from mibyan_jupyter.jupyter.view.tool_cards import (
    ToolClock,
    code_lang,
    code_text,
    powers_line,
    source_label,
)
from mibyan_jupyter.jupyter.view.tool_output import ToolOutputPump

RiskNote = Callable[[str, Mapping[str, Any]], str | None]
NO_ARGS: Any = object()
"""A card made before its call's arguments are known (they stream in)."""


class ToolOps:
    """Cards shown, calls denied, each call's clock, the approvals pending."""

    def __init__(self, outbox: Outbox, *, risk_note: RiskNote | None) -> None:
        self._out = outbox
        self._risk_note = risk_note
        self.cards: set[str] = set()
        self._denied: set[str] = set()
        self._clock = ToolClock()
        self.pending_approvals: set[str] = set()
        self.output = ToolOutputPump(lambda op: outbox.add(op, now=False), outbox.flush)
        """What running tools print (from any thread, see .tool_output)."""

    def card(self, call_id: str, name: str, args: Any, *, msg: str | None) -> None:
        """Create the tool card of ``call_id`` (status pending) or set its arguments
        (``args`` parsed; a card shows code as code, see :mod:`.tool_cards`)."""
        op = ToolOp(op="tool", id=call_id, name=name, msg=msg)
        if args is not NO_ARGS:
            op["args"] = fmt.args_text(name, args)
            lang = code_lang(name)
            if lang is not None and code_text(name, args) is not None:
                op["lang"] = lang
        self.cards.add(call_id)
        self._out.add(op)

    def status(self, call_id: str, status: ToolStatus) -> None:
        self._out.add(StatusOp(op="status", id=call_id, status=status))

    def running(self, call_id: str, status: ToolStatus = "running") -> None:
        """The call runs from now (started, or approved): the card's timing starts."""
        started = self._clock.begin(call_id)
        self._out.add(StatusOp(op="status", id=call_id, status=status, started=started))

    def run(self, status: RunStatus) -> None:
        self._out.add(RunOp(op="run", status=status))

    def update(self, event: ToolExecutionUpdate) -> None:
        """A partial result that is a chunk of output (``details={"stream": "stdout"}``, text
        content) goes to the card's live output; other partials are not shown."""
        partial = event.partial
        details = getattr(partial, "details", None)
        content = getattr(partial, "content", None)
        stream = details.get("stream") if isinstance(details, Mapping) else None
        if stream in ("stdout", "stderr") and isinstance(content, str):
            self.output.write(event.call_id, stream, content)

    def end(self, event: ToolExecutionEnd) -> None:
        result = fmt.result_op(event.call_id, event.result, tool_images(event.result))
        if (seconds := self._clock.seconds(event.call_id)) is not None:
            result["seconds"] = seconds
        self._out.add(result)
        status: ToolStatus = "error" if event.is_error else "done"
        if isinstance(event.result.details, Mapping) and event.result.details.get("stopped"):
            status = "stopped"  # the Stop button ended it (kernel_tools/live.py)
        self.status(event.call_id, "denied" if event.call_id in self._denied else status)

    def approval(self, event: ApprovalRequested) -> None:
        args = event.args if isinstance(event.args, Mapping) else {}
        risk = self._risk_note(event.name, args) if self._risk_note is not None else None
        self.pending_approvals.add(event.call_id)  # before the card: a click may be quick
        op = ApprovalOp(
            op="approval",
            id=event.call_id,
            name=event.name,
            args=fmt.args_text(event.name, event.args),
            reason=event.reason,
            risk=risk,
        )
        if (powers := powers_line(event.name)) is not None:
            op["powers"] = powers
        if (source := source_label(event.name)) is not None:
            op["server"] = source
        self._out.add(op)
        self.status(event.call_id, "awaiting approval")
        self.run("awaiting_approval")

    def resolved(self, event: ApprovalResolved) -> None:
        self._out.add(
            DecidedOp(
                op="decided",
                id=event.call_id,
                approved=event.approved,
                outcome=fmt.outcome_text(event),
            )
        )
        if event.approved:
            self.running(event.call_id, "approved")
        else:
            self._clock.forget(event.call_id)  # it never ran: no time to show
            self.status(event.call_id, "denied")
            self._denied.add(event.call_id)
        if event.call_id in self.pending_approvals:
            self.pending_approvals.discard(event.call_id)
            if not self.pending_approvals:
                self.run("running")
