"""The view's side of spilled tool results: the full text of a result, page by page.

Why the kernel answers the page and not the page reading anything itself: a tool result
over the spill limit reaches the transcript (and the card) as a preview; its full text
lives only in the session's result store (``core/results.py``, ``store/results.py``;
docs/architecture.md, "Context compression"). So the card's "Load the full result" sends
an ``expand`` message (:class:`.front_end.ExpandMessage`) and the kernel answers with a ``page``
op (:class:`.ops.PageOp`) of at most :data:`PAGE_CHARS` characters, sent through the
outbox like every other op (so it is redacted and in order).

The page is untrusted: it names a tool call, never a result id, and only the calls whose
spilled results this view showed can be read, in chunks the kernel sizes. The text is tool
output: the front end sets it with ``textContent``.

This works while the run goes on: when it ends, the live view is replaced by the static
transcript, which shows the preview only (the full text stays in the store: ``read_result``
and ``%agent export`` still reach it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from mibyan_jupyter.core.messages import ToolMessage
from mibyan_jupyter.core.results import SPILL_DETAILS_KEY, ResultStore
from mibyan_jupyter.jupyter.view.ops import PageOp

_log = logging.getLogger(__name__)

PAGE_CHARS = 65_536
"""Characters per ``page`` op: one request stays a small comm message (~64 KB), and a
multi-megabyte result is read only as far as the user asks."""
BOUNDARY_SLACK = 512
"""How far past :data:`PAGE_CHARS` a page may run to end at a space: the outbox redacts each
op on its own, so a key cut in two by a page boundary would reach the page as two halves no
redaction matches (keys hold no spaces: the same rule as the outbox's hold-back)."""


def _cut(text: str) -> tuple[str, bool]:
    """``text`` (read with the slack) cut at the first space at or after :data:`PAGE_CHARS`,
    and whether nothing follows what is returned (the result's end was read)."""
    ended = len(text) < PAGE_CHARS + BOUNDARY_SLACK  # asked for more than there was
    if len(text) <= PAGE_CHARS:
        return text, ended
    end = next((i for i in range(PAGE_CHARS, len(text)) if text[i].isspace()), None)
    if end is None:  # no space within the slack: a blob, sent as read
        return text, ended
    return text[: end + 1], ended and end + 1 == len(text)


def spill_info(result: ToolMessage) -> tuple[str, int] | None:
    """The id the result was kept by and its full size, when it was spilled."""
    details = result.details
    if not isinstance(details, Mapping):
        return None
    spilled = details.get(SPILL_DETAILS_KEY)
    if not isinstance(spilled, Mapping):
        return None
    result_id, chars = spilled.get("id"), spilled.get("chars")
    if not isinstance(result_id, str) or not isinstance(chars, int):
        return None
    return result_id, chars


class SpillPager:
    """The spilled results of one view's calls, and the store their text is paged from."""

    def __init__(self) -> None:
        self.results: ResultStore | None = None
        """Set by the cell's run (``AgentView.read_results_from``); ``None``: not readable."""
        self._kept: dict[str, str] = {}
        """call id -> the result id its card may read."""
        self._lock = threading.Lock()

    def see(self, result: ToolMessage) -> None:
        """A finished call: if its result was spilled, its card may read it from now on."""
        info = spill_info(result)
        if info is not None:
            with self._lock:
                self._kept[result.tool_call_id] = info[0]

    def page(self, call_id: object, offset: object) -> PageOp | None:
        """The chunk from ``offset`` of the spilled result of ``call_id``; ``None`` for a
        request that names no spilled call of this view (ignored, like a stale click)."""
        if not isinstance(call_id, str) or isinstance(offset, bool) or not isinstance(offset, int):
            return None
        with self._lock:
            result_id = self._kept.get(call_id)
        if result_id is None or offset < 0:
            return None
        op = PageOp(op="page", id=call_id, offset=offset, text="", next=offset, done=True, error="")
        if self.results is None:
            op["error"] = "the full result cannot be read from here"
            return op
        try:
            text = self.results.page(result_id, offset, PAGE_CHARS + BOUNDARY_SLACK)
        except Exception as error:  # a closed or locked store: say so on the card
            _log.warning("could not read result %s: %s", result_id, error)
            op["error"] = f"the full result could not be read: {error}"
            return op
        if text is None:
            op["error"] = "the full result is no longer kept"
            return op
        op["text"], op["done"] = _cut(text)
        op["next"] = offset + len(op["text"])  # before the outbox redacts the text
        return op
