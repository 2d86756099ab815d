"""Reading a session's messages back, typed, fast, and whatever an older version wrote.

Why one query and one validation: resuming a 10,000-message session row by row (a
``fetchall`` and a ``validate_json`` per row) cost more than openai-agents' untyped
``get_items``. So the common case is one row from SQLite (the session's JSON texts joined
into one array by ``group_concat``, as bytes) and one ``validate_json`` call over it.

Why a second, slow path: a stored row may not be what this version writes. Rows written by
an older version or edited by hand can hold bytes that are not UTF-8, JSON escapes of lone
surrogates (``"\\udcff"``, from a file name that was not UTF-8), or JSON that does not
parse at all. None of that may refuse a session for good (docs/architecture.md,
"Decisions", 5), so when the fast path fails the rows are read one by one: bad text is
replaced (U+FFFD, :mod:`~mibyan_jupyter.core.safe_text`), an unreadable row is rebuilt from
its denormalized columns (role, search text, tool call id and name, tool calls) and only
dropped when even that fails. What was done is counted by kind, for the user to be told.
Nothing is written back: the stored record keeps what it holds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import TypeAdapter, ValidationError

from mibyan_jupyter.core.messages import (
    MESSAGE_ADAPTER,
    MESSAGES_ADAPTER,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.safe_text import clean_text
from mibyan_jupyter.store.conn import StoreDatabase

_TOOL_CALLS: TypeAdapter[tuple[ToolCall, ...]] = TypeAdapter(tuple[ToolCall, ...])
_STOP_REASONS: tuple[str, ...] = get_args(StopReason)

TEXT = "text"
"""Repair kind: a row held text that is not valid Unicode; it was replaced."""
REBUILT = "rebuilt"
"""Repair kind: a row did not parse; it was rebuilt from its other columns."""
DROPPED = "dropped"
"""Repair kind: a row did not parse and could not be rebuilt; it was left out."""


def _where(session_id: str, upto: int | None) -> tuple[str, tuple[Any, ...]]:
    if upto is None:
        return "session_id = ?", (session_id,)
    return "session_id = ? AND seq < ?", (session_id, upto)


def read_messages(
    db: StoreDatabase, session_id: str, *, upto: int | None = None
) -> tuple[list[Message], Counter[str]]:
    """The session's messages in order (``upto``: sequence numbers < upto) and what had to
    be repaired to read them (kind -> count; empty in the common case)."""
    where, params = _where(session_id, upto)
    blob, count = db.conn.execute(db.dialect.load_all.format(where=where), params).fetchone()
    if not count:
        return [], Counter()
    try:
        messages = MESSAGES_ADAPTER.validate_json(blob)
    except ValidationError:
        pass  # some row is not what this version writes: read them one by one
    else:
        if len(messages) == count:  # a row holding two objects would make more
            return messages, Counter()
    return _read_row_by_row(db, where, params)


def _read_row_by_row(
    db: StoreDatabase, where: str, params: tuple[Any, ...]
) -> tuple[list[Message], Counter[str]]:
    columns = ("data", "role", "text", "tool_calls", "tool_call_id", "tool_name", "stop_reason")
    as_bytes = ", ".join(db.dialect.as_bytes.format(column) for column in columns)
    rows = db.conn.execute(
        f"SELECT {as_bytes}, created_at FROM messages WHERE {where} ORDER BY seq", params
    ).fetchall()
    repairs: Counter[str] = Counter()
    messages: list[Message] = []
    for row in rows:
        message, kind = _read_row(row)
        if kind is not None:
            repairs[kind] += 1
        if message is not None:
            messages.append(message)
    return messages, repairs


def _text(value: bytes | None) -> str:
    """A stored text column as valid Unicode, whatever bytes it holds."""
    return clean_text(value.decode("utf-8", "replace")) if value else ""


def _cleaned(value: Any) -> Any:
    """Parsed JSON with every string made valid Unicode (lone surrogates replaced)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k): _cleaned(v) for k, v in value.items()}
    return value


def _read_row(row: Sequence[Any]) -> tuple[Message | None, str | None]:
    """One stored row as a message, and the repair kind it needed (``None``: none)."""
    data: bytes = row[0]
    try:
        return MESSAGE_ADAPTER.validate_json(data), None
    except ValidationError:
        pass
    try:
        parsed = _cleaned(json.loads(data.decode("utf-8", "replace")))
        if isinstance(parsed, dict) and isinstance(row[7], int | float):
            parsed.setdefault("timestamp", row[7])  # the same message at every load
        return MESSAGE_ADAPTER.validate_python(parsed), TEXT
    except (ValueError, ValidationError):
        pass
    rebuilt = _rebuild(row)
    return (rebuilt, REBUILT) if rebuilt is not None else (None, DROPPED)


def _rebuild(row: Sequence[Any]) -> Message | None:
    """A message made from the row's denormalized columns, when they say enough."""
    _, role, text, tool_calls, tool_call_id, tool_name, stop_reason, created = row
    role_text, content = _text(role), _text(text)
    timestamp = float(created) if isinstance(created, int | float) else 0.0
    if role_text == "user":
        return UserMessage(content=content, timestamp=timestamp)
    if role_text == "tool" and tool_call_id:
        return ToolMessage(
            tool_call_id=_text(tool_call_id),
            name=_text(tool_name),
            content=content,
            timestamp=timestamp,
        )
    if role_text != "assistant":
        return None
    calls: tuple[ToolCall, ...] = ()
    if tool_calls:
        try:
            calls = _TOOL_CALLS.validate_python(_cleaned(json.loads(_text(tool_calls))))
        except (ValueError, ValidationError):
            return None  # calls we cannot name: their results could not be matched
    # The search text is the content, then one "name arguments" line per call.
    suffix = "\n".join(f"{c.function.name} {c.function.arguments}" for c in calls)
    if suffix and content.endswith(suffix):
        content = content[: -len(suffix)].rstrip("\n")
    stop = _text(stop_reason)
    return AssistantMessage(
        content=content or None,
        tool_calls=calls,
        stop_reason=stop if stop in _STOP_REASONS else ("tool_use" if calls else "stop"),  # type: ignore[arg-type]
        timestamp=timestamp,
    )
