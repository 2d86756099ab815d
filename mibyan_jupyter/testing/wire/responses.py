"""The fake provider's OpenAI Responses encoder.

The stream: named events with ``sequence_number``; a reasoning item (summary events,
``encrypted_content`` only when the request ``include``s it, as the real API does), a message
item (``output_text.delta``), function_call items (``function_call_arguments.delta``), then
``response.completed`` — or ``response.incomplete`` for a length or content-filter stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mibyan_jupyter.testing.scripts import FakeReply, FakeUsage, Json
from mibyan_jupyter.testing.wire.common import (
    Encoded,
    arguments_text,
    pieces,
    signature_of,
    sse,
)


def _responses_usage(u: FakeUsage) -> Json:
    prompt = u.input + u.cache_read
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": prompt + u.output,
    }


def response_object(
    *, model: str, n: int, body: Json, status: str, output: list[Json], **extra: Any
) -> Json:
    """The ``response`` object of Responses events (keys as in the recorded streams)."""
    given = body.get("reasoning")
    reasoning: Json = given if isinstance(given, dict) else {}
    obj: Json = {
        "id": f"resp_fake{n}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }
    return obj | extra


class _ResponsesStream:
    """Numbers events and output items while a reply is laid out."""

    def __init__(self, *, model: str, n: int, body: Json) -> None:
        self.model, self.n, self.body = model, n, body
        self.events: list[bytes] = []
        self.output: list[Json] = []

    def emit(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(self.events)} | fields
        self.events.append(sse(data, kind))

    def response(self, status: str, **extra: Any) -> Json:
        return response_object(
            model=self.model, n=self.n, body=self.body, status=status, output=self.output, **extra
        )

    def item(self, item: Json, fill: Callable[[Json], None]) -> None:
        """``output_item.added`` with ``item`` in progress, the item's own events, then
        ``output_item.done`` with the completed item (which ``fill`` completes)."""
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index, item=item)
        done = dict(item)
        fill(done)
        self.emit("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def reasoning(self, reply: FakeReply, *, encrypted: bool) -> None:
        """The reasoning item: its summary streamed, the signature when ``encrypted``."""
        n, size = self.n, reply.chunk_size
        ref: Json = {"item_id": f"rs_fake{n}", "output_index": len(self.output)}
        extra = {"encrypted_content": signature_of(reply, n)} if encrypted else {}

        def fill(done: Json) -> None:
            if reply.thinking:
                part = {"type": "summary_text", "text": reply.thinking}
                empty = {"type": "summary_text", "text": ""}
                self.emit(
                    "response.reasoning_summary_part.added", **ref, summary_index=0, part=empty
                )
                for p in pieces(reply.thinking, size):
                    self.emit(
                        "response.reasoning_summary_text.delta", **ref, summary_index=0, delta=p
                    )
                self.emit(
                    "response.reasoning_summary_text.done",
                    **ref,
                    summary_index=0,
                    text=part["text"],
                )
                self.emit("response.reasoning_summary_part.done", **ref, summary_index=0, part=part)
                done["summary"] = [part]

        self.item({"id": ref["item_id"], "type": "reasoning", **extra, "summary": []}, fill)

    def message(self, reply: FakeReply) -> None:
        """The assistant message item, its text streamed as ``output_text`` deltas."""
        ref: Json = {"item_id": f"msg_fake{self.n}", "output_index": len(self.output)}
        ref |= {"content_index": 0}

        def fill(done: Json) -> None:
            part = {"type": "output_text", "text": "", "annotations": []}
            self.emit("response.content_part.added", **ref, part=part)
            for p in pieces(reply.text, reply.chunk_size):
                self.emit("response.output_text.delta", **ref, delta=p)
            self.emit("response.output_text.done", **ref, text=reply.text)
            self.emit("response.content_part.done", **ref, part=part | {"text": reply.text})
            done |= {"status": "completed", "content": [part | {"text": reply.text}]}

        msg = {"id": ref["item_id"], "type": "message", "status": "in_progress"}
        self.item(msg | {"role": "assistant", "content": []}, fill)

    def function_calls(self, reply: FakeReply) -> None:
        """One ``function_call`` item per call, its arguments streamed as deltas."""
        n, size = self.n, reply.chunk_size
        for i, call in enumerate(reply.calls):
            args = arguments_text(call, spaced=False)
            ref: Json = {"item_id": f"fc_fake{n}_{i}", "output_index": len(self.output)}

            def fill(done: Json, args: str = args, ref: Json = ref) -> None:
                for p in pieces(args, size):
                    self.emit("response.function_call_arguments.delta", **ref, delta=p)
                self.emit("response.function_call_arguments.done", **ref, arguments=args)
                done |= {"status": "completed", "arguments": args}

            fc = {"id": ref["item_id"], "type": "function_call", "status": "in_progress"}
            fc |= {"arguments": "", "call_id": call.id or f"call_{n}_{i}", "name": call.name}
            self.item(fc, fill)


def encode_responses(reply: FakeReply, *, model: str, n: int, body: Json) -> Encoded:
    """``reply`` as a Responses stream and as the equivalent ``response`` object."""
    s = _ResponsesStream(model=model, n=n, body=body)
    s.emit("response.created", response=s.response("in_progress"))
    s.emit("response.in_progress", response=s.response("in_progress"))
    include = body.get("include")
    if reply.thinking or reply.signature is not None:
        encrypted = isinstance(include, list) and "reasoning.encrypted_content" in include
        s.reasoning(reply, encrypted=encrypted)
    if reply.text:
        s.message(reply)
    s.function_calls(reply)
    usage = _responses_usage(reply.usage) if reply.usage else None
    if reply.stop in ("length", "content_filter"):
        reason = "max_output_tokens" if reply.stop == "length" else "content_filter"
        final = s.response("incomplete", usage=usage, incomplete_details={"reason": reason})
        s.emit("response.incomplete", response=final)
    else:
        final = s.response("completed", usage=usage)
        s.emit("response.completed", response=final)
    return Encoded(s.events, final)
