"""The sessions API's work on sessions: list, search, read one, fork, rename, delete.

Each function takes the server's one :class:`~mibyan_jupyter.store.SessionStore` and runs
on the store's thread (:mod:`.service`), never on the server's event loop. They are plain
functions of the store's public API, so the routes (:mod:`.handlers`) only parse and
answer. Every read sweeps for dead owners first (``SessionStore`` does it in its reads;
the listing calls it itself), so a crashed kernel's session shows ``interrupted`` and
``leased`` is what the store's one liveness rule says now (docs/architecture.md, "The
sessions API"). Every read is the server user's: the listing, its count and the search
through store/scope.py's one rule, every session by id through the server's store
(:mod:`.owner`), so another user's session is ``not_found``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import cast, get_args

from mibyan_jupyter.server.errors import ApiError, bad_request
from mibyan_jupyter.server.shapes import (
    CourseListJSON,
    ForkJSON,
    HitJSON,
    LinkKind,
    RenameJSON,
    SearchJSON,
    SessionJSON,
    SessionListJSON,
    Status,
)
from mibyan_jupyter.store.lease import delete_unless_held, read_holder
from mibyan_jupyter.store.scope import UserScope, user_scope
from mibyan_jupyter.store.search import search
from mibyan_jupyter.store.session_queries import (
    SessionInfo,
    SessionNotFoundError,
    by_id,
    count_sessions,
    page,
    root_ids,
)
from mibyan_jupyter.store.sessions import SessionStore

SESSION_ID = re.compile(r"[0-9a-f]{6,32}")
"""A session id (32 hex digits) or a prefix of one (6+), as the store accepts them."""
TITLE_MAX = 200
_LINK_KINDS = get_args(LinkKind)
_LIVE = ("running", "awaiting_approval")


def checked_id(session_id: str) -> str:
    """``session_id`` when it can be an id; a 400 otherwise (ids are lowercase hex)."""
    if not SESSION_ID.fullmatch(session_id):
        raise bad_request(f"{session_id[:40]!r} is not a session id (6 to 32 lowercase hex digits)")
    return session_id


def held(store: SessionStore, info: SessionInfo) -> bool:
    """Whether a live kernel holds the session's lease or runs it now."""
    _token, holder = read_holder(store.db.conn, info.id, store.liveness)
    return holder.alive or holder.busy


def session_json(store: SessionStore, infos: Sequence[SessionInfo]) -> list[SessionJSON]:
    """The API's form of each session (its root looked up once for all of them)."""
    roots = root_ids(store.db, [info.id for info in infos])
    return [
        {
            "id": info.id,
            "title": info.title,
            "model": info.model or "",
            "status": cast(Status, info.status),
            "notebook": info.notebook_path,
            "created_at": info.created_at,
            "updated_at": info.updated_at,
            "messages": info.message_count,
            "cost": info.cost,
            "parent_id": info.parent_id,
            "link_kind": cast(LinkKind, info.link_kind) if info.link_kind in _LINK_KINDS else None,
            "root_id": roots[info.id],
            "leased": held(store, info),
        }
        for info in infos
    ]


def list_sessions(store: SessionStore, *, limit: int, offset: int) -> SessionListJSON:
    """One page of the sessions, newest first, and how many there are."""
    store.mark_interrupted_if_dead()
    scope = user_scope(store.db)
    infos = page(store.db, limit=limit, offset=offset, scope=scope)
    total = count_sessions(store.db, scope=scope)
    return {"sessions": session_json(store, infos), "total": total}


def course_sessions(store: SessionStore, *, limit: int, offset: int) -> CourseListJSON:
    """One page of the sessions of others the reader may see: on the team store, an
    instructor's students' (row-level security's ``review`` policy, from the database's
    roster; a student sees none). SQLite has no such authority (the file's rows are
    whoever wrote them), so there it is refused (docs/architecture.md, "Admin policy")."""
    if not store.db.dialect.is_postgres:
        raise bad_request(
            "scope=course needs the team store (PostgreSQL); on SQLite use %agent review"
        )
    scope = UserScope(store.db.user, legacy=False, others=True)
    infos = page(store.db, limit=limit, offset=offset, scope=scope)
    total = count_sessions(store.db, scope=scope)
    ids = [info.id for info in infos]
    owners: dict[str, str] = {}
    if ids:
        marks = ",".join("?" * len(ids))
        found = store.db.conn.execute(
            f"SELECT id, user_name FROM sessions WHERE id IN ({marks})", ids
        )
        owners = {row[0]: row[1] for row in found}
    teaches = store.db.conn.execute(
        "SELECT 1 FROM course_members WHERE user_name = ? AND role = 'instructor' LIMIT 1",
        (store.db.user,),
    ).fetchone()
    return {
        "sessions": session_json(store, infos),
        "total": total,
        "owners": owners,
        "instructs": teaches is not None,
    }


def search_sessions(store: SessionStore, text: str, *, limit: int) -> SearchJSON:
    """The best ``limit`` messages matching ``text`` and their sessions (each once)."""
    store.mark_interrupted_if_dead()
    hits = search(store, text, limit=limit, scope=user_scope(store.db))
    order = list(dict.fromkeys(hit.session_id for hit in hits))
    shown: list[HitJSON] = [
        {
            "session_id": hit.session_id,
            "seq": hit.seq,
            "role": hit.role,
            "snippet": hit.snippet,
            "highlights": [[start, end] for start, end in hit.highlights],
            "rank": hit.score,
        }
        for hit in hits
    ]
    infos: list[SessionInfo] = []
    for session_id in order:
        try:
            infos.append(by_id(store.db, session_id))
        except SessionNotFoundError:  # deleted since the search: its hits go too
            shown = [hit for hit in shown if hit["session_id"] != session_id]
    return {"sessions": session_json(store, infos), "hits": shown}


def one_session(store: SessionStore, session_id: str) -> SessionJSON:
    return session_json(store, [store.get(checked_id(session_id))])[0]


def fork(store: SessionStore, session_id: str, at: int | None) -> ForkJSON:
    """A fork of the first ``at`` messages (all when ``None``), and what it holds."""
    parent = store.get(checked_id(session_id))
    count = parent.message_count
    if at is not None and not 0 <= at <= count:
        raise bad_request(f"'at' must be between 0 and {count} (the session's messages)")
    child = store.fork(parent.id, at=at)
    return {"session": session_json(store, [child])[0], "includes": fork_includes(parent, at)}


def fork_includes(parent: SessionInfo, at: int | None) -> str:
    """One line saying what a fork of ``parent`` at ``at`` holds."""
    count = parent.message_count
    cut = count if at is None else at
    said = f"the first {cut} of {count} messages" if cut < count else f"all {count} messages"
    if parent.link_kind == "compression":
        said += " of the compacted conversation (its summary stands for the older messages)"
    if parent.status in _LIVE and cut == count:
        said += "; a run in progress is included up to its last finished message"
    return said[0].upper() + said[1:]


def rename(store: SessionStore, session_id: str, title: object) -> RenameJSON:
    """Give the session a new title: one line of 1 to :data:`TITLE_MAX` characters."""
    if not isinstance(title, str):
        raise bad_request("'title' must be a string")
    clean = title.strip()
    if not 1 <= len(clean) <= TITLE_MAX:
        raise bad_request(f"a title has 1 to {TITLE_MAX} characters (after trimming spaces)")
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in clean):
        raise bad_request("a title is one line of text (no control characters)")
    info = store.rename(store.get(checked_id(session_id)).id, clean)
    return {"session": session_json(store, [info])[0]}


def delete(store: SessionStore, session_id: str) -> None:
    """Delete the session unless a live kernel holds it (409 ``leased``)."""
    info = store.get(checked_id(session_id))
    holder = delete_unless_held(store.db, info.id, store.liveness)
    if holder is not None:
        who = holder.describe() if holder.owner.pid is not None else "a kernel running it"
        raise ApiError(
            409,
            "leased",
            f"session {info.id[:8]} is in use by {who}: stop its run or shut that kernel "
            "down first",
        )
