"""Rows in and out: the few writes and reads everything else in the store is built from.

Each write is one short transaction (see :meth:`Database.transaction`), so a message is
durable the moment its call returns and a killed kernel loses nothing that had finished.
Messages are stored whole, as the core's JSON (``MESSAGE_ADAPTER``, the storage format),
next to a few denormalized columns for queries and the full-text index.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from mibyan_jupyter.core.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
)
from mibyan_jupyter.secrets import REDACT, scrub_config
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.liveness import LIVE_STATUSES, Owner
from mibyan_jupyter.store.loading import read_messages

TITLE_LENGTH = 80
_TOOL_CALLS: TypeAdapter[tuple[ToolCall, ...]] = TypeAdapter(tuple[ToolCall, ...])


def new_id() -> str:
    return uuid.uuid4().hex


def encode_message(message: Message) -> str:
    """The stored form of a message (the ``data`` column): the core's JSON without its
    ``None`` fields (smaller, and about twice as fast to load)."""
    return MESSAGE_ADAPTER.dump_json(message, exclude_none=True).decode()


def message_text(message: Message) -> str:
    """What full-text search sees: the text, plus tool names and arguments."""
    if isinstance(message, AssistantMessage):
        parts = [message.content or ""]
        parts += [f"{c.function.name} {c.function.arguments}" for c in message.tool_calls]
        return "\n".join(p for p in parts if p)
    return content_text(message.content)


def insert_session(
    db: StoreDatabase,
    *,
    session_id: str | None = None,
    title: str = "",
    model: str | None = None,
    api_mode: str | None = None,
    notebook_path: str | None = None,
    config: Mapping[str, Any] | None = None,
    parent_id: str | None = None,
    link_kind: str | None = None,
    fork_at: int | None = None,
) -> str:
    """Create a session row; ``config`` is scrubbed of credentials before it is written."""
    session_id = session_id or new_id()
    now = time.time()
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO sessions (id, parent_id, link_kind, fork_at, title, model, api_mode,"
            " notebook_path, config, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                session_id,
                parent_id,
                link_kind,
                fork_at,
                title[:TITLE_LENGTH],
                model,
                api_mode,
                notebook_path,
                json.dumps(scrub_config(config or {})),
                now,
                now,
            ),
        )
    return session_id


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as RFC 7396 says (what SQLite's ``json_patch`` does):
    an object merges key by key, a ``null`` removes its key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def record_settings(db: StoreDatabase, session_id: str, config: Mapping[str, Any]) -> None:
    """Add ``config`` entries to the session's config (scrubbed of credentials first), in
    one transaction: the settings a session was started with, for its resumes. Merged
    here, not in SQL (PostgreSQL has no ``json_patch``; the config is a text column on
    both), with the row locked so a concurrent pin is not lost (docs/architecture.md,
    "The team store (PostgreSQL)")."""
    patch = scrub_config(config)
    with db.transaction() as conn:
        row = conn.execute(
            "SELECT config FROM sessions WHERE id = ?" + db.dialect.lock_row, (session_id,)
        ).fetchone()
        if row is None:
            return
        try:
            current = json.loads(row[0])
        except ValueError:  # a config edited by hand: the settings replace it
            current = {}
        conn.execute(
            "UPDATE sessions SET config = ? WHERE id = ?",
            (json.dumps(merge_patch(current, patch)), session_id),
        )


def append_message(
    db: StoreDatabase, session_id: str, message: Message, *, seq: int | None = None
) -> int:
    """Append ``message`` as the session's message number ``seq`` (default: the next one),
    in its own transaction; returns the sequence number. A user message also touches the
    session's ``updated_at`` (the runs' status changes do the rest) and becomes its title
    when it has none."""
    with db.transaction() as conn:
        return insert_message(conn, session_id, message, seq=seq)


def insert_message(conn: Conn, session_id: str, message: Message, *, seq: int | None = None) -> int:
    """:func:`append_message` inside a transaction the caller holds, so a caller can write
    a message together with rows that belong to it (the writer's usage row) atomically."""
    tool_calls = None
    stop_reason = usage = model = None
    aborted = 0
    if isinstance(message, AssistantMessage):
        if message.tool_calls:
            tool_calls = _TOOL_CALLS.dump_json(message.tool_calls).decode()
        stop_reason, model = message.stop_reason, message.model
        usage = message.usage.model_dump_json()
        aborted = int(message.stop_reason == "aborted")
    # No secret reaches SQLite: one reading of the secrets for every stored text.
    data, text, tool_calls = REDACT.many(
        encode_message(message), message_text(message), tool_calls or ""
    )
    now = time.time()
    if seq is None:
        # The session row's lock first: on PostgreSQL two writers' transactions run at once
        # and would both take max(seq) + 1 (SQLite's write lock is held already; a no-op).
        conn.execute("UPDATE sessions SET updated_at = updated_at WHERE id = ?", (session_id,))
        row = conn.execute(
            "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        seq = int(row[0])
    conn.execute(
        "INSERT INTO messages (session_id, seq, role, text, data, tool_calls, tool_call_id,"
        " tool_name, stop_reason, usage, model, aborted, created_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            session_id,
            seq,
            message.role,
            text,
            data,
            tool_calls or None,
            message.tool_call_id if isinstance(message, ToolMessage) else None,
            message.name if isinstance(message, ToolMessage) else None,
            stop_reason,
            usage,
            model,
            aborted,
            now,
        ),
    )
    title = (
        text.strip().splitlines()[0] if isinstance(message, UserMessage) and text.strip() else None
    )
    if title:
        conn.execute(
            "UPDATE sessions SET updated_at = ?, title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
            (now, title[:TITLE_LENGTH], session_id),
        )
    return seq


def index_pending(db: StoreDatabase) -> int:
    """Add every message not yet in the full-text index, in one transaction; returns how
    many. Search calls it first, so results always cover every stored message. The team
    store has nothing to do: its index is a generated column, kept with each row
    (docs/architecture.md, "The team store (PostgreSQL)")."""
    if db.dialect.is_postgres:
        return 0
    with db.transaction() as conn:
        (upto,) = conn.execute("SELECT indexed_upto FROM fts_state WHERE id = 1").fetchone()
        (newest,) = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        if newest <= upto:
            return 0
        cursor = conn.execute(
            "INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages WHERE id > ? AND id <= ?",
            (upto, newest),
        )
        conn.execute("UPDATE fts_state SET indexed_upto = ? WHERE id = 1", (newest,))
        return int(cursor.rowcount)


def load_messages(db: StoreDatabase, session_id: str, *, upto: int | None = None) -> list[Message]:
    """The session's messages, typed, in order (``upto``: sequence numbers < upto). A row
    an older version wrote badly is repaired as it is read, never refused (what was
    repaired: :func:`~.loading.read_messages`, which this is)."""
    return read_messages(db, session_id, upto=upto)[0]


def set_status(
    db: StoreDatabase, session_id: str, status: str, *, end_reason: str | None = None
) -> None:
    """Keep the session's status true, in its own transaction (see :func:`update_status`)."""
    with db.transaction() as conn:
        update_status(conn, session_id, status, end_reason=end_reason)


def update_status(
    conn: Conn, session_id: str, status: str, *, end_reason: str | None = None
) -> None:
    """:func:`set_status` inside a transaction the caller holds. ``running`` (and
    ``awaiting_approval``) also record which process owns the session
    (:meth:`~.liveness.Owner.this_process`), so a session whose kernel died can be shown
    as interrupted."""
    now = time.time()
    live = Owner.this_process() if status in LIVE_STATUSES else Owner(None, None)
    owner = (live.pid, live.host)
    conn.execute(
        "UPDATE sessions SET status = ?, owner_pid = ?, owner_host = ?, updated_at = ?,"
        " ended_at = CASE WHEN ? = 'idle' THEN ? ELSE ended_at END,"
        " end_reason = coalesce(?, end_reason) WHERE id = ?",
        (status, owner[0], owner[1], now, status, now, end_reason, session_id),
    )
