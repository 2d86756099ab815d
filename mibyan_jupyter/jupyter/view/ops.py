"""The live view's protocol, defined once: every op the kernel sends, every message back.

Why typed dicts and not dict literals at each sender: the ops cross a language boundary,
and a misspelt field or kind would only show as a blank spot in the page. Here mypy checks
every sender against these types, and ``static/ops.d.ts`` mirrors them for the front end,
whose ``view.js`` is type-checked against that mirror by ``tsc`` in the extension build
(``labextension/build.sh``). ``tests/jupyter/test_view_ops.py`` keeps the two in step: the
kinds must be the same set, and the ops a real run sends must type-check as the front end's
``ViewOp`` (docs/architecture.md, "Streaming").

``typing_extensions.TypedDict`` rather than ``typing``'s: on Python 3.11 pydantic can only
validate the former, which the tests do on what the view really sent.

On the wire (see :mod:`.outbox`) the structural ops travel as these objects, and the three
delta kinds as ``[kind, id, text]`` or a bare string; the front end unpacks a delta into a
:class:`DeltaOp`, so it handles one kind of object.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, get_args, get_type_hints

from typing_extensions import TypedDict

from mibyan_jupyter.jupyter.view.child_ops import ChildStartOp, ChildStatusOp

DeltaKind: TypeAlias = Literal["text", "thinking", "args"]
"""An element's streamed text: a reply's text, its thinking, a call's arguments."""
RunStatus: TypeAlias = Literal["running", "awaiting_approval", "done"]
ToolStatus: TypeAlias = Literal[
    "running", "awaiting approval", "approved", "done", "error", "denied", "stopped"
]
"""Shown as is on the card (the front end starts a card at "pending"). "approved": it runs
as soon as its turn comes (at once in a parallel batch; a sequential batch runs its calls
in call order), and the card says "running" once it prints."""
NoticeLevel: TypeAlias = Literal["info", "warning", "error"]
NoticeKind: TypeAlias = Literal[
    "note", "error", "stop", "budget", "retry", "fallback", "compaction", "notes"
]
BarName: TypeAlias = Literal["turns", "total_tokens", "cost", "context"]
QueueMode: TypeAlias = Literal["steer", "follow_up"]
Scope: TypeAlias = Literal["once", "session", "always"]
AnsweredBy: TypeAlias = Literal["user", "default", "stopped"]
"""Who answered an ask card: a click (or a typed answer), the documented default (no front
end), or nobody: Stop or Kernel > Interrupt ended the wait."""


class HeaderOp(TypedDict):
    op: Literal["header"]
    title: str
    """"" for a new session: the front end then shows the session id."""
    session: str
    model: str
    demo: bool
    answered: NotRequired[str]
    """The model that answered last when it was not ``model`` (a failover): the header
    says "answered by" it. Left out when the session's own model answered."""
    reviewable: NotRequired[str]
    """The admin policy makes the conversation reviewable by instructors: the header
    shows this line (left out otherwise)."""


class RunOp(TypedDict):
    op: Literal["run"]
    status: RunStatus


class UserOp(TypedDict):
    """A user message the agent took: the cell's prompt, or a steering or follow-up one."""

    op: Literal["user"]
    text: str
    child: NotRequired[str]  # and below: made in delegated child ``child``'s card (.child_ops)


class AssistantOp(TypedDict):
    """An assistant message starts: its elements are made (``id`` is ``a1``, ``a2``...)."""

    op: Literal["assistant"]
    id: str
    child: NotRequired[str]


class DeltaOp(TypedDict):
    """Streamed text appended to element ``id`` (what the front end unpacks a wire delta
    into; the kernel sends it through :meth:`.outbox.Outbox.delta`)."""

    op: DeltaKind
    id: str
    text: str


class FinalOp(TypedDict):
    """An assistant message ended. Its streamed text was rendered as it went (``BlocksOp``),
    so ``html`` is "" then; when no text streamed (a reply sent whole), ``html`` is the
    text as sanitized HTML, shown in place of the (empty) streamed text."""

    op: Literal["final"]
    id: str
    html: str
    thinking: str | None
    """The thinking when none streamed (some providers send it whole), else ``None``."""


class BlocksOp(TypedDict):
    """Blocks of message ``id``'s streamed text completed: the front end shows the next
    ``chars`` characters of that text (after what earlier blocks showed) as these blocks:
    ``blocks`` is a program over those characters that builds whitelisted elements (see
    ``export/markdown_blocks.py``); the rest, the open block, stays text. On the wire it is
    ``[chars, blocks]`` when it follows its element's text (see :mod:`.outbox`)."""

    op: Literal["blocks"]
    id: str
    chars: int
    blocks: str


class ClearOp(TypedDict):
    """A retry or failover starts the reply over: clear message ``id`` and drop its cards."""

    op: Literal["clear"]
    id: str
    calls: list[str]


class ToolOp(TypedDict):
    """Create a tool card, or set its arguments once they are known."""

    op: Literal["tool"]
    id: str
    name: str
    msg: str | None
    """The assistant message that made the call, if one is streaming."""
    args: NotRequired[str]
    lang: NotRequired[str]
    """``args`` is code in this language ("python", "shell"): the card shows it as code."""
    child: NotRequired[str]


class StatusOp(TypedDict):
    op: Literal["status"]
    id: str
    status: ToolStatus
    started: NotRequired[float]
    """With "running": when the call began to run (Unix time, s), for the card's timing."""


class ToolOutputOp(TypedDict):
    """Output a running tool printed (``run_python``, ``run_shell``), sent while it runs,
    throttled like text. Untrusted tool output, already redacted: shown as text only."""

    op: Literal["tool_output"]
    id: str
    stream: Literal["stdout", "stderr"]
    text: str


class ResultOp(TypedDict):
    op: Literal["result"]
    id: str
    summary: str
    text: str
    more: int
    """Characters of the result left out of ``text``."""
    error: bool
    images: list[str]
    """``data:image/png;base64,`` URLs, validated (see :mod:`.media`)."""
    seconds: NotRequired[float]
    """How long the call ran (from its start, or from its approval), for the card."""
    spilled: NotRequired[int]
    """The result was spilled (``core/results.py``): ``text`` is its preview and the full
    result has this many characters; the card offers to load it (:class:`ExpandMessage`)."""


class PageOp(TypedDict):
    """The answer to an :class:`ExpandMessage`: a chunk of a spilled result's full text,
    shown as text only (it is tool output: untrusted)."""

    op: Literal["page"]
    id: str
    """The tool call whose card asked."""
    offset: int
    text: str
    next: int
    """Where the next chunk starts in the full text: ``offset`` plus the characters read,
    not ``len(text)`` (the outbox redacts ``text``, which can change its length)."""
    done: bool
    """No text after this chunk (the card stops offering more)."""
    error: str
    """"" normally; else why nothing could be read (the text is then empty)."""


class ApprovalOp(TypedDict):
    op: Literal["approval"]
    id: str
    name: str
    args: str
    reason: str
    risk: str | None
    powers: NotRequired[str]
    """A line on what approving means for code that runs as the user (run_python...)."""
    server: NotRequired[str]
    """Where the tool comes from, e.g. "server NAME" for an MCP server's tool."""


class DecidedOp(TypedDict):
    op: Literal["decided"]
    id: str
    approved: bool
    outcome: str


class AskChoice(TypedDict):
    """One answer of an ask card: ``value`` comes back, ``label`` is the button."""

    value: str
    label: str
    detail: str
    """What choosing it does, in a sentence ("" for none)."""


class AskText(TypedDict):
    """The ask card's text box: a typed answer comes back as an :class:`AnswerMessage`
    whose ``choice`` is "" and whose ``text`` is what was typed."""

    placeholder: str
    limit: int
    """At most this many characters (the box's ``maxlength``; the kernel cuts longer)."""


class AskOp(TypedDict):
    """A question with choices (the ask card, :mod:`.ask`): the approval card's general
    form, for whatever the kernel must ask the user (take a session over, compact, go on
    past a budget, a clarify tool's question)."""

    op: Literal["ask"]
    id: str
    question: str
    choices: list[AskChoice]
    default: str
    """The value chosen when no front end can click (said on the card)."""
    text: NotRequired[AskText]
    """A text box for a typed answer too (left out: buttons only)."""


class AnsweredOp(TypedDict):
    """The ask card ``id`` was answered: its buttons are disabled, the outcome shown."""

    op: Literal["answered"]
    id: str
    choice: str
    """"" for a typed answer (``label`` is then the text, shown as text only)."""
    label: str
    by: AnsweredBy


class StatsOp(TypedDict):
    """What assistant message ``id`` cost and took, shown when the pointer is on it."""

    op: Literal["stats"]
    id: str
    input: int
    """Prompt tokens (cache reads and writes included)."""
    output: int
    cost: float | None
    """``None``: the price is unknown."""
    seconds: float
    """From the message's start to its end."""


class BarOp(TypedDict):
    op: Literal["bar"]
    name: BarName
    title: str
    label: str
    fraction: float | None
    """Used over limit in [0, 1]; ``None`` when there is no limit (no progress shown)."""


class NoticeOp(TypedDict):
    op: Literal["notice"]
    level: NoticeLevel
    kind: NoticeKind
    text: str
    detail: NotRequired[str]
    """Shown collapsed under the notice (a compaction's summary): expanded on a click."""
    child: NotRequired[str]


class QueuedOp(TypedDict):
    """A prompt given to the running agent from another cell, shown when it is queued."""

    op: Literal["queued"]
    mode: QueueMode
    text: str


StructuralOp: TypeAlias = (
    HeaderOp
    | RunOp
    | UserOp
    | AssistantOp
    | FinalOp
    | BlocksOp
    | ClearOp
    | ToolOp
    | StatusOp
    | ToolOutputOp
    | ResultOp
    | PageOp
    | ApprovalOp
    | DecidedOp
    | AskOp
    | AnsweredOp
    | StatsOp
    | BarOp
    | NoticeOp
    | QueuedOp
    | ChildStartOp
    | ChildStatusOp
)
"""The ops sent as objects (``Outbox.add``)."""
ViewOp: TypeAlias = StructuralOp | DeltaOp
"""Every op the front end applies, after unpacking."""


def tags(union: object, field: str) -> frozenset[str]:
    """The values of the literal ``field`` over the typed dicts of ``union`` (the op kinds
    of :data:`ViewOp`; the types of ``front_end.FrontEndMessage``)."""
    found: set[str] = set()
    for member in get_args(union):
        found.update(get_args(get_type_hints(member)[field]))
    return frozenset(found)


OP_KINDS = tags(ViewOp, "op")
