"""A response scripted as its exact SSE events, for wire shapes no :class:`FakeReply` can
say: an Anthropic ``pause_turn`` with server-tool blocks, a Responses stream of raw
reasoning items, an error event of a given shape.

Why it exists beside the encoders: those lay a reply out the way one real server does; a
test of how the client copes with another server's layout (or a recorded stream replayed
over real HTTP) needs the events verbatim, and nothing else between them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mibyan_jupyter.testing.wire.common import sse


@dataclass(frozen=True)
class RawReply:
    """HTTP 200 and ``events``, each sent as one chunk of the stream.

    An event that is a dict is sent as ``event: <its "type">`` (no ``event:`` line when it
    has no ``type``, as in Chat Completions chunks) and ``data: <compact JSON>``; a string
    is sent verbatim, so it must be a whole SSE event (``"data: [DONE]\\n\\n"``).
    """

    events: Sequence[dict[str, Any] | str]

    def encoded(self) -> list[bytes]:
        """The chunks of the response body."""
        return [_frame(event) for event in self.events]

    def final(self) -> dict[str, Any]:
        """What a non-streaming request gets: the events as a JSON list (no real server
        answers so; a test that scripts raw events streams)."""
        return {"raw_events": [e if isinstance(e, dict) else {"text": e} for e in self.events]}


def _frame(event: dict[str, Any] | str) -> bytes:
    if isinstance(event, str):
        return event.encode()
    kind = event.get("type")
    return sse(event, kind if isinstance(kind, str) and kind else None)


def raw_json(reply: RawReply) -> bytes:
    """The body a non-streaming request gets (see :meth:`RawReply.final`)."""
    return json.dumps(reply.final()).encode()
