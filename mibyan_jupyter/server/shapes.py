"""The sessions API's JSON, typed once: every body a route answers with.

Why typed dicts: the shapes cross a language boundary (the lab extension's sessions panel
reads them), and a renamed field would only show as an empty column there. mypy checks
every builder here against these types, and the tests validate what a real server sent
with pydantic ``TypeAdapter`` s of them (``typing_extensions.TypedDict``: on Python 3.11
pydantic validates only that one). The contract with the panel is written in
docs/architecture.md, "The sessions API".
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from typing_extensions import TypedDict

Status: TypeAlias = Literal["idle", "running", "awaiting_approval", "interrupted"]
LinkKind: TypeAlias = Literal["fork", "compression", "child", "delegation"]
"""``delegation``: a child agent's session (migration 0005); ``child`` is kept for clients."""
ExportFormat: TypeAlias = Literal["ipynb", "md"]
ErrorCode: TypeAlias = Literal["bad_request", "not_found", "leased", "store", "forbidden"]
"""``forbidden``: jupyter_server refused the request (no token or cookie, or a failed XSRF
check); ``store``: the database cannot be used (corrupt, locked, read-only) or the server
failed otherwise; one line, never a traceback."""


class SessionJSON(TypedDict):
    id: str
    title: str
    model: str
    status: Status
    notebook: str | None
    created_at: float
    updated_at: float
    messages: int
    """The session's own stored messages (a compaction's child counts its copy)."""
    cost: float | None
    """US dollars spent in this session; ``None`` when a price is unknown."""
    parent_id: str | None
    link_kind: LinkKind | None
    root_id: str
    """The first session of its lineage (itself when it has no parent)."""
    leased: bool
    """A live kernel holds it now (store/liveness.py decides): it cannot be deleted."""


class SessionListJSON(TypedDict):
    sessions: list[SessionJSON]
    total: int


class CourseListJSON(SessionListJSON):
    """``scope=course`` (team store only): the sessions of others row-level security lets
    the server's login role read (an instructor's students'), whose each is, and whether
    the role instructs a course at all, so the panel offers its Course view only to an
    instructor (docs/architecture.md, "Admin policy")."""

    owners: dict[str, str]
    """Session id -> the student (login role) it belongs to."""
    instructs: bool
    """The role is an instructor of some course in the roster (even with no sessions yet)."""


class HitJSON(TypedDict):
    session_id: str
    seq: int
    role: str
    snippet: str
    """The message's own text around the matches, verbatim (``…`` where it was cut)."""
    highlights: list[list[int]]
    """``[start, end]`` offsets into ``snippet`` of the matched words, in order."""
    rank: float
    """Relevance, higher is better (bm25, negated); hits come best first."""


class SearchJSON(TypedDict):
    sessions: list[SessionJSON]
    """The sessions of the hits, each once, in the order of their best hit."""
    hits: list[HitJSON]


class ToolCallJSON(TypedDict):
    id: str
    name: str
    arguments: str


class MessageJSON(TypedDict):
    seq: int
    """The message's place in the lineage's history (0 first), across compactions."""
    role: Literal["system", "user", "assistant", "tool"]
    text: str
    name: str | None
    """The tool's name on a tool result, else ``None``."""
    tool_calls: list[ToolCallJSON]
    timestamp: float


class MessagesJSON(TypedDict):
    messages: list[MessageJSON]
    total: int
    next: int | None
    """The ``offset`` of the next page; ``None`` on the last page."""


class TranscriptJSON(TypedDict):
    html: str
    """The read-only transcript, sanitized by export/ (safe to insert as HTML)."""


class ForkJSON(TypedDict):
    session: SessionJSON
    includes: str
    """One line: what the fork holds (e.g. a run in progress, up to its last message)."""


class RenameJSON(TypedDict):
    session: SessionJSON


class ErrorJSON(TypedDict):
    error: str
    code: ErrorCode
