"""Spilled tool results: a large result is kept aside and the transcript gets a preview.

Why (docs/architecture.md, "Context compression"): one ``df.to_string()`` or a log dump can
be megabytes; kept in the transcript it travels in every later request, fills the window
and is billed again each turn. So text over ``result_limit`` characters is kept whole in a
:class:`ResultStore` and the model sees its head, its tail, its size and how to read the
rest (the ``read_result`` tool pages through it). Images are capped separately, by bytes
each and by count per result, since their cost is not in characters.

The store is a protocol: :class:`MemoryResults` keeps results in this process (no store
attached); the store layer persists them per session. Pure: no I/O here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol

from .messages import ContentPart, ImagePart, TextPart, ToolMessage, content_text
from .tools import Tool, tool

SPILL_DETAILS_KEY = "spilled"
"""``ToolMessage.details["spilled"] = {"id": ..., "chars": N, "tool": name}``."""
RESULT_LIMIT = 16_000
PREVIEW_HEAD = 2_000
PREVIEW_TAIL = 1_000
IMAGE_MAX_BYTES = 1_000_000
IMAGE_MAX_COUNT = 4
PAGE_LIMIT = 4_000


class ResultStore(Protocol):
    """Where spilled results are kept in full, and paged from."""

    def keep(self, call_id: str, tool_name: str, content: str) -> str:
        """Keep ``content``; returns the id the model pages it by."""
        ...

    def page(self, result_id: str, offset: int, limit: int) -> str | None:
        """``limit`` characters from ``offset``; ``None``: the id is unknown."""
        ...


@dataclass
class MemoryResults:
    """The in-process :class:`ResultStore` (the default when no store is attached)."""

    _kept: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def keep(self, call_id: str, tool_name: str, content: str) -> str:
        result_id = f"r{next(self._ids)}"
        self._kept[result_id] = content
        return result_id

    def page(self, result_id: str, offset: int, limit: int) -> str | None:
        text = self._kept.get(result_id)
        if text is None:
            return None
        return text[max(offset, 0) : max(offset, 0) + max(limit, 0)]


def preview(text: str, result_id: str) -> str:
    """What the transcript keeps of a spilled text: head, tail, size, and how to read on."""
    head, tail = text[:PREVIEW_HEAD], text[-PREVIEW_TAIL:]
    skipped = len(text) - len(head) - len(tail)
    return (
        f"[This result is {len(text):,} characters; it was kept as id={result_id!r}. "
        f"Shown: the first {len(head):,} and the last {len(tail):,}. To read more, call "
        f"read_result with id={result_id!r} offset={len(head)} (limit up to {PAGE_LIMIT}).]\n"
        f"{head}\n[... {skipped:,} characters not shown ...]\n{tail}"
    )


def _image_bytes(part: ImagePart) -> int:
    url = part.image_url.url
    return len(url) * 3 // 4 if url.startswith("data:") else len(url)


def _capped_images(parts: tuple[ContentPart, ...]) -> tuple[tuple[ContentPart, ...], int]:
    """Images over the byte cap, and past the count cap, replaced by a line saying so."""
    kept: list[ContentPart] = []
    images = dropped = 0
    for part in parts:
        if isinstance(part, ImagePart):
            size = _image_bytes(part)
            if size > IMAGE_MAX_BYTES or images >= IMAGE_MAX_COUNT:
                dropped += 1
                why = "over the 1 MB limit" if size > IMAGE_MAX_BYTES else "past 4 images"
                kept.append(TextPart(text=f"[an image of {size:,} bytes was left out: {why}]"))
                continue
            images += 1
        kept.append(part)
    return tuple(kept), dropped


def spill(message: ToolMessage, store: ResultStore, limit: int) -> ToolMessage:
    """``message`` as the transcript keeps it: text over ``limit`` characters kept in
    ``store`` and replaced by its preview; images capped. The same object when nothing
    was over a limit."""
    content = message.content
    if not isinstance(content, str):
        content, dropped = _capped_images(content)
        text = content_text(content)
        if len(text) <= limit:
            return message if not dropped else message.model_copy(update={"content": content})
        images = tuple(p for p in content if isinstance(p, ImagePart))
    else:
        text, images = content, ()
        if len(text) <= limit:
            return message
    result_id = store.keep(message.tool_call_id, message.name, text)
    shown = preview(text, result_id)
    details = dict(message.details or {})
    details[SPILL_DETAILS_KEY] = {"id": result_id, "chars": len(text), "tool": message.name}
    new_content: str | tuple[ContentPart, ...] = (
        (TextPart(text=shown), *images) if images else shown
    )
    return message.model_copy(update={"content": new_content, "details": details})


def read_result_tool(store: ResultStore) -> Tool:
    """The ``read_result`` tool: pages through a spilled result (no side effects)."""

    @tool(name="read_result", side_effects=False)
    def read_result(id: str, offset: int = 0, limit: int = PAGE_LIMIT) -> str:
        """Read part of a tool result that was too large to show whole.

        Args:
            id: the result's id, as its preview names it.
            offset: the first character to read.
            limit: how many characters to read (at most 4000).
        """
        limit = min(max(limit, 1), PAGE_LIMIT)
        page = store.page(id, max(offset, 0), limit)
        if page is None:
            raise ValueError(f"there is no kept result with id={id!r}")
        if not page:
            return f"[nothing at offset {offset}: the result is shorter]"
        end = max(offset, 0) + len(page)
        return f"[characters {max(offset, 0)}-{end} of result {id}]\n{page}"

    return read_result
