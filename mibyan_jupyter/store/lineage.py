"""The whole history of a compacted conversation, across its compression lineage.

Why: a compaction moves the conversation to a child session whose first messages are the
compacted transcript (the first user message, one summary, the kept tail), so the child
alone no longer shows what was said in the middle. Search already sees every stored row
(the parent keeps its messages); an export must too (docs/architecture.md, "Context
compression"). The parent holds every message up to the compaction, and the child's
``fork_at`` says how many of its first messages are the compacted copy, so the history is
the root's messages followed by each descendant's messages past its ``fork_at``. Only
``compression`` links are followed: a fork is a conversation of its own, and a delegated
child (``delegation``) is a sub-task's, never the conversation's continuation (so a resume
of the parent stays on the parent); :func:`delegated_children` finds those of a whole
lineage, for an export that shows what the children did.
"""

from __future__ import annotations

from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.session_queries import SessionInfo, delegated

MAX_DEPTH = 10_000
"""How many compression links are followed at most (a guard against a hand-made cycle)."""


def compression_chain(db: StoreDatabase, session_id: str) -> list[tuple[str, int]]:
    """``(session id, fork_at)`` from the oldest compression ancestor to ``session_id``
    (the root's ``fork_at`` is 0: all its messages count)."""
    chain: list[tuple[str, int]] = []
    current: str | None = session_id
    seen: set[str] = set()
    while current is not None and current not in seen and len(chain) < MAX_DEPTH:
        seen.add(current)
        row = db.conn.execute(
            "SELECT parent_id, link_kind, fork_at FROM sessions WHERE id = ?", (current,)
        ).fetchone()
        if row is None:
            break
        parent, kind, fork_at = row
        compressed = kind == "compression" and parent is not None
        chain.append((current, int(fork_at or 0) if compressed else 0))
        current = parent if compressed else None
    return chain[::-1]


def lineage_messages(db: StoreDatabase, session_id: str) -> list[Message]:
    """Every message of the conversation ``session_id`` continues, in order: what was
    said before each compaction, then what followed it (the summaries themselves are
    left out, the messages they stand for are there)."""
    history: list[Message] = []
    for index, (sid, fork_at) in enumerate(compression_chain(db, session_id)):
        messages = load_messages(db, sid)
        history += messages if index == 0 else messages[fork_at:]
    return history


def delegated_children(db: StoreDatabase, session_id: str) -> list[SessionInfo]:
    """The child sessions delegated from any session of ``session_id``'s compression
    lineage (a child started before a compaction belongs to the same conversation),
    oldest first."""
    found = [child for sid, _ in compression_chain(db, session_id) for child in delegated(db, sid)]
    return sorted(found, key=lambda info: info.created_at)
