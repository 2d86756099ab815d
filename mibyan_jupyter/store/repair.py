"""Repairing a stored transcript so a provider accepts it, and telling what was repaired.

The store keeps what happened, including the damage a crash leaves: an assistant message
whose tool calls never got results (the kernel died mid-batch, or a fork cut the batch),
aborted partial replies. Older versions, other tools and hand edits leave other damage: a
tool result whose call is gone, two replies in a row, a reply whose prompt could not be
read, duplicate tool-call ids (some servers send them). Providers reject all of that, and a
session must never be refused for good (docs/architecture.md, "Decisions", 5), so
:func:`repair_transcript` makes the transcript valid in one pass and counts what it did in a
:class:`RepairReport`, one line per kind, for the user to be told.

Repair is a pure function of the stored messages, and nothing is written back: synthetic
results go right after the batch's real results, so the same repair finds the same place
however many messages a resumed run appends later, and the stored record keeps only what
really happened.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.transcript import TranscriptError, check_history, unique_call_id

UNKNOWN_OUTCOME = (
    "Tool call interrupted before its result was recorded (the session ended unexpectedly); "
    "its outcome is unknown: it may or may not have run. Check before repeating it."
)
NOT_RUN = "Tool call never ran: the session ended while it was waiting for the user's approval."


MISSING_PROMPT = "(The message that came before this reply could not be read.)"
"""The placeholder prompt put before a reply that has none (its prompt row was lost)."""

REPAIR_LINES: dict[str, str] = {
    "text": "{n} stored message(s) held text that is not valid Unicode (bad UTF-8 or lone "
    "surrogates, from an older version): the bad characters were replaced with U+FFFD",
    "rebuilt": "{n} stored message(s) could not be read: rebuilt from their search text",
    "dropped": "{n} stored message(s) could not be read or placed and were left out",
    "missing_result": "{n} tool call(s) had no result (the session stopped mid-call): the "
    "model is told their outcome is unknown",
    "not_run": "{n} tool call(s) were waiting for approval when the session stopped: the "
    "model is told they never ran",
    "orphan_result": "{n} tool result(s) without their call were left out of what the model sees",
    "duplicate_call_id": "{n} duplicate tool-call id(s) were made unique",
    "merged": "{n} pair(s) of replies in a row were joined into one (roles must alternate)",
    "missing_user": "{n} reply(ies) had no prompt before them: a placeholder prompt was put in",
    "system": "{n} system message(s) inside the conversation were left out",
}
"""One line per repair kind; ``{n}`` is how many."""


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What loading and repairing a stored session changed (kind -> count). Falsy when
    nothing was repaired; :meth:`lines` is what the user is shown."""

    counts: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.counts.values())

    def __add__(self, other: RepairReport) -> RepairReport:
        return RepairReport(dict(Counter(self.counts) + Counter(other.counts)))

    def lines(self) -> list[str]:
        """One sentence per kind of repair, in a fixed order."""
        order = [k for k in REPAIR_LINES if self.counts.get(k)]
        order += sorted(k for k in self.counts if k not in REPAIR_LINES and self.counts[k])
        return [
            REPAIR_LINES.get(kind, "{n} repair(s) of kind " + kind).format(n=self.counts[kind])
            for kind in order
        ]


def _missing_result(
    call: ToolCall, after: AssistantMessage, not_run: Collection[str]
) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id,
        name=call.function.name,
        content=NOT_RUN if call.id in not_run else UNKNOWN_OUTCOME,
        is_error=True,
        details={"synthetic": True, "outcome": "not_run" if call.id in not_run else "unknown"},
        timestamp=after.timestamp,
    )


def repair(messages: Sequence[Message], *, not_run: Collection[str] = ()) -> list[Message]:
    """The transcript with every tool call of a sendable assistant message answered and
    the roles in an order a provider accepts (:func:`repair_transcript` without its
    report)."""
    return repair_transcript(messages, not_run=not_run)[0]


def repair_transcript(
    messages: Sequence[Message], *, not_run: Collection[str] = (), verify: bool = False
) -> tuple[list[Message], RepairReport]:
    """The transcript made valid to send, and what was done to it.

    A missing result is inserted right after the results its batch does have; calls in
    ``not_run`` get :data:`NOT_RUN`, others :data:`UNKNOWN_OUTCOME`. A tool result that
    answers no open call (a duplicate, or a stray) is dropped: no provider accepts it.
    Duplicate call ids in one message are made unique; two sendable replies in a row are
    joined; a reply with no prompt before it gets a placeholder prompt; a system message
    inside the conversation is left out. Everything else is kept as it is, aborted and
    failed replies included, so a valid transcript comes back equal.

    A repaired transcript is checked against the core's rules (and what still fails is
    dropped, :func:`drop_until_valid`); one that needed nothing is checked only with
    ``verify`` (the pass applies every rule, and the Agent checks its history anyway).
    """
    fixer = _Fixer(not_run)
    for message in messages:
        fixer.feed(message)
    fixer.close_batch()
    repaired = fixer.out
    if fixer.counts or verify:  # unchanged input passed every rule above already
        repaired = drop_until_valid(repaired, fixer.counts)
    return repaired, RepairReport(dict(fixer.counts))


class _Fixer:
    """The single pass of :func:`repair_transcript`: the alternation rules of
    ``core.transcript`` applied as repairs instead of errors."""

    def __init__(self, not_run: Collection[str]) -> None:
        self.not_run = not_run
        self.out: list[Message] = []
        self.counts: Counter[str] = Counter()
        self.batch: AssistantMessage | None = None
        self.open_calls: dict[str, ToolCall] = {}
        self.renamed: dict[str, deque[str]] = {}
        self.last: str | None = None
        """The last sendable message: "system", "user", "reply" (text), "calls", "results"."""
        self.reply_at = -1

    def feed(self, message: Message) -> None:
        if isinstance(message, ToolMessage):
            self._result(message)
            return
        self.close_batch()
        if isinstance(message, SystemMessage):
            if self.out:
                self.counts["system"] += 1
                return
            self.last = "system"
        elif isinstance(message, UserMessage):
            self.last = "user"
        elif message.sendable:
            message = self._reply(message)
        self.out.append(message)

    def _reply(self, message: AssistantMessage) -> AssistantMessage:
        if self.last in (None, "system"):
            self.counts["missing_user"] += 1
            self.out.append(UserMessage(content=MISSING_PROMPT, timestamp=message.timestamp))
        elif self.last == "reply":  # two replies in a row: one reply to the prompt
            self.counts["merged"] += 1
            previous = self.out.pop(self.reply_at)
            assert isinstance(previous, AssistantMessage)
            joined = "\n\n".join(t for t in (previous.content, message.content) if t)
            message = message.model_copy(update={"content": joined or None})
        message = self._unique_ids(message)
        self.reply_at = len(self.out)
        self.last = "calls" if message.tool_calls else "reply"
        if message.tool_calls:
            self.batch = message
            self.open_calls = {call.id: call for call in message.tool_calls}
        return message

    def _unique_ids(self, message: AssistantMessage) -> AssistantMessage:
        ids = [call.id for call in message.tool_calls]
        if len(set(ids)) == len(ids):
            return message
        calls: list[ToolCall] = []
        taken: set[str] = set()
        for call in message.tool_calls:
            new = unique_call_id(call.id, taken)  # the first keeps its id; later ones "-2"...
            self.renamed.setdefault(call.id, deque()).append(new)
            if new != call.id:
                self.counts["duplicate_call_id"] += 1
                call = call.model_copy(update={"id": new})
            calls.append(call)
        return message.model_copy(update={"tool_calls": tuple(calls)})

    def _result(self, message: ToolMessage) -> None:
        queue = self.renamed.get(message.tool_call_id)
        call_id = queue.popleft() if queue else message.tool_call_id
        if self.open_calls.pop(call_id, None) is None:
            self.counts["orphan_result"] += 1
            return
        if call_id != message.tool_call_id:
            message = message.model_copy(update={"tool_call_id": call_id})
        self.out.append(message)
        if not self.open_calls:
            self.last = "results"

    def close_batch(self) -> None:
        """Answer the calls of the open batch that got no result."""
        if self.open_calls and self.batch is not None:
            for call in self.open_calls.values():
                self.counts["not_run" if call.id in self.not_run else "missing_result"] += 1
                self.out.append(_missing_result(call, self.batch, self.not_run))
            self.last = "results"
        self.open_calls = {}
        self.renamed = {}


def drop_until_valid(messages: list[Message], counts: Counter[str]) -> list[Message]:
    """Drop what the core still refuses (a case the repair pass does not foresee), one
    message at a time, counting them as ``dropped``, so a session is never refused for
    good."""
    for _ in range(len(messages)):
        try:
            check_history(messages)
            return messages
        except TranscriptError as error:
            counts["dropped"] += 1
            messages = messages[: error.index] + messages[error.index + 1 :]
    return messages
