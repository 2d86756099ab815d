"""Reasoning items of a Responses stream, one thinking block each.

A Responses reply may hold several ``reasoning`` items (a reasoning model thinks, calls a
tool, thinks again; gpt-oss served raw streams ``reasoning_text`` per item), and each item's
``encrypted_content`` must go back with that item, so one item is one thinking block, never
a merge of several. Servers differ in what frames an item: OpenAI sends
``output_item.added`` and ``.done`` around its deltas; some compatible servers send only
deltas naming their ``item_id`` (or ``output_index``), or the whole item only at ``.done``.
This tracker keys thinking blocks by item, whatever arrives, so the parser only says what
came in.
"""

from __future__ import annotations

from typing import Any

from mibyan_jupyter.core.stream import StreamEvent

from ._openai_common import MessageBuilder


class ReasoningItems:
    """Which thinking block of a :class:`MessageBuilder` belongs to which reasoning item."""

    __slots__ = ("_b", "_blocks", "_open", "_positions")

    def __init__(self, builder: MessageBuilder) -> None:
        self._b = builder
        self._blocks: dict[str, int] = {}  # item key -> index of its thinking block
        self._positions: dict[int, str] = {}  # output index -> item key
        self._open: str | None = None  # the item whose block is open

    def key(self, item_id: object, position: object) -> str | None:
        """The item's key: its id, else what its output index was first known as."""
        if isinstance(item_id, str) and item_id:
            if isinstance(position, int):
                self._positions.setdefault(position, item_id)
            return item_id
        if isinstance(position, int):
            return self._positions.setdefault(position, f"#{position}")
        return None

    def _is_open(self, key: str | None) -> bool:
        return self._b.thinking_open and (key is None or self._open == key)

    def begin(self, key: str | None, out: list[StreamEvent]) -> None:
        """Open the block of item ``key`` (``output_item.added``)."""
        self._b.open_thinking(out)
        self._own(key)

    def delta(self, key: str | None, text: str, out: list[StreamEvent]) -> None:
        """A piece of reasoning (summary or raw text) of item ``key``; a delta of another
        item than the open one starts that item's block."""
        if not self._is_open(key):
            self.begin(key, out)
        self._b.thinking(text, out)

    def new_part(self, key: str | None, out: list[StreamEvent]) -> None:
        """Another summary part of the same item: set off as a paragraph."""
        if self._is_open(key) and self._b.thinking_streamed:
            self._b.thinking("\n\n", out)

    def done(self, key: str | None, item: dict[str, Any], out: list[StreamEvent]) -> None:
        """``output_item.done``: the item's text when nothing streamed (a server that sends
        it only here), and its id and ``encrypted_content`` on its own block."""
        item_id, encrypted = item.get("id"), item.get("encrypted_content")
        signature = item_id if isinstance(item_id, str) else None
        secret = encrypted if isinstance(encrypted, str) and encrypted else None
        if key is not None and key in self._blocks and not self._is_open(key):
            # Its block was closed when another part began: sign it where it is.
            self._b.seal_thinking(self._blocks[key], signature=signature, encrypted=secret)
            return
        if not self._is_open(key):
            self.begin(key, out)
        if not self._b.thinking_streamed:
            text = _item_text(item)
            if text:
                self._b.thinking(text, out)
        self._b.end_thinking(out, signature=signature, encrypted=secret)
        self._open = None

    def _own(self, key: str | None) -> None:
        self._open = key
        if key is not None:
            self._blocks[key] = self._b.thinking_index


def _item_text(item: dict[str, Any]) -> str:
    """The summary of a reasoning item, else its raw ``reasoning_text`` content."""
    for field in ("summary", "content"):
        parts = item.get(field) or ()
        text = "\n\n".join(
            p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
        if text:
            return text
    return ""
