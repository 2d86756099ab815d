"""The sessions API's reads of a conversation: its messages (paged), its read-only
transcript, and its export as a file.

All three read the whole history of the conversation the session continues, across its
compactions (``store.lineage``: the messages the summaries stand for, not the summaries),
as ``%agent export`` does; the export also puts spilled tool results back in full
(docs/architecture.md, "The sessions API"). Text leaves redacted (``secrets.REDACT``), and
the transcript is the same sanitized HTML the saved notebook keeps (export/), so the panel
may insert it as is. Runs on the store's thread (:mod:`.service`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import partial
from urllib.parse import quote

from mibyan_jupyter.core.conversation import total_usage
from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolMessage, content_text
from mibyan_jupyter.export.children import ChildTranscript, stored_child
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.secrets import REDACT
from mibyan_jupyter.server.sessions import checked_id
from mibyan_jupyter.server.shapes import ExportFormat, MessageJSON, MessagesJSON, TranscriptJSON
from mibyan_jupyter.store.lineage import compression_chain, delegated_children, lineage_messages
from mibyan_jupyter.store.session_queries import SessionInfo
from mibyan_jupyter.store.sessions import SessionStore

CONTENT_TYPES: dict[ExportFormat, str] = {
    "ipynb": "application/x-ipynb+json",
    "md": "text/markdown; charset=utf-8",
}
_UNSAFE_NAME = re.compile(r"[^\w\- .,()]+")


@dataclass(frozen=True, slots=True)
class Download:
    """An export as the route sends it."""

    body: bytes
    filename: str
    content_type: str
    includes: str
    """One line for ``X-Mibyan-Includes``: what the file holds."""

    def disposition(self) -> str:
        """``attachment`` with an ASCII ``filename`` and the exact one as ``filename*``."""
        folded = unicodedata.normalize("NFKD", self.filename)  # é -> e + a combining accent
        ascii_name = folded.encode("ascii", "ignore").decode() or "session"
        if ascii_name.startswith("."):
            ascii_name = "session" + ascii_name
        exact = quote(self.filename, safe="")
        return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{exact}"


def meta(info: SessionInfo, messages: list[Message]) -> SessionMeta:
    """What an export says about the session besides its messages."""
    return SessionMeta(
        id=info.id,
        title=info.title,
        model=info.model,
        created_at=info.created_at,
        usage=total_usage(messages),
        cost=info.cost,
        notebook_path=info.notebook_path,
    )


def message_json(seq: int, message: Message) -> MessageJSON:
    if isinstance(message, AssistantMessage):
        text, calls = message.content or "", message.tool_calls
    else:
        text, calls = content_text(message.content), ()
    return {
        "seq": seq,
        "role": message.role,
        "text": REDACT(text),
        "name": message.name if isinstance(message, ToolMessage) else None,
        "tool_calls": [
            {"id": c.id, "name": c.function.name, "arguments": REDACT(c.function.arguments)}
            for c in calls
        ],
        "timestamp": message.timestamp,
    }


def messages_page(store: SessionStore, session_id: str, *, offset: int, limit: int) -> MessagesJSON:
    """The messages ``offset`` .. ``offset + limit`` of the session's history."""
    info = store.get(checked_id(session_id))
    history = lineage_messages(store.db, info.id)
    end = min(offset + limit, len(history))
    shown = [message_json(seq, history[seq]) for seq in range(offset, end)]
    return {"messages": shown, "total": len(history), "next": end if end < len(history) else None}


def transcript(store: SessionStore, session_id: str) -> TranscriptJSON:
    """The conversation as the static, sanitized transcript a finished cell shows."""
    from mibyan_jupyter.export.transcript import render_transcript

    info = store.get(checked_id(session_id))
    history = lineage_messages(store.db, info.id)
    session = meta(info, history)
    status = "completed" if info.status == "idle" else info.status
    demo = (info.model or "").startswith("demo")
    bundle = render_transcript(
        history,
        session=session,
        status=status,
        demo=demo,
        usage=session.usage,
        children=children(store, info),  # folded under the calls that started them
    )
    return {"html": bundle["text/html"]}


def export(store: SessionStore, session_id: str, fmt: ExportFormat) -> Download:
    """The session exported as a notebook or Markdown, as ``%agent export`` writes it."""
    from mibyan_jupyter.export.children import add_child_cells, markdown_children
    from mibyan_jupyter.export.markdown import export_markdown
    from mibyan_jupyter.export.notebook import export_notebook, notebook_text
    from mibyan_jupyter.export.spilled import inline_spilled
    from mibyan_jupyter.store.results import full_text

    info = store.get(checked_id(session_id))
    history = inline_spilled(
        lineage_messages(store.db, info.id), partial(full_text, store.db, info.id)
    )
    session = meta(info, history)
    kids = children(store, info)  # what its child agents did, after its own messages
    if fmt == "md":
        text = export_markdown(history, session=session)
        text += f"\n{markdown_children(kids)}\n" if kids else ""
    else:
        notebook = export_notebook(history, session=session)
        add_child_cells(notebook, kids)
        text = notebook_text(notebook)
    includes = export_includes(store, info, len(history))
    if kids:
        includes += f"; and the transcripts of {len(kids)} delegated child agent(s)"
    return Download(text.encode("utf-8"), f"{file_stem(info)}.{fmt}", CONTENT_TYPES[fmt], includes)


def children(store: SessionStore, info: SessionInfo) -> list[ChildTranscript]:
    """The child agents the session delegated to, with their stored transcripts (as
    ``%agent export`` includes them, export/children.py)."""
    from mibyan_jupyter.export.spilled import inline_spilled
    from mibyan_jupyter.store.records import load_messages
    from mibyan_jupyter.store.results import full_text

    found: list[ChildTranscript] = []
    for child in delegated_children(store.db, info.id):
        stored = load_messages(store.db, child.id)
        messages = inline_spilled(stored, partial(full_text, store.db, child.id))
        status = child.end_reason or child.status
        found.append(stored_child(meta(child, messages), child.config, messages, status))
    return found


def file_stem(info: SessionInfo) -> str:
    """The download's name without its extension: the title made safe, else the id."""
    stem = _UNSAFE_NAME.sub(" ", info.title).strip(" .")
    stem = re.sub(r"\s+", " ", stem)[:80].strip()
    return stem or f"session-{info.id[:8]}"


def export_includes(store: SessionStore, info: SessionInfo, count: int) -> str:
    """One ASCII line saying what an export of ``info`` holds."""
    said = f"{count} message{'s' if count != 1 else ''}"
    compactions = len(compression_chain(store.db, info.id)) - 1
    if compactions > 0:
        plural = "s" if compactions != 1 else ""
        said += f" across {compactions} compaction{plural} (the messages, not the summaries)"
    if info.status in ("running", "awaiting_approval"):
        said += "; a run in progress is included up to its last finished message"
    return said
