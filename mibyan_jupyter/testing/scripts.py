"""The fake provider's script: the replies and faults a test (or a JSON file) queues up.

Why plain frozen dataclasses: tests build them positionally (``FakeReply("Hi")``,
``FakeCall("f", {"x": 1})``, ``Fault("reset")``), and pydantic still validates them when
a script is loaded from JSON (:func:`parse_script`), unknown keys included.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import ConfigDict, TypeAdapter

from mibyan_jupyter.providers.base import ApiMode

StopKind: TypeAlias = Literal["stop", "length", "content_filter"]
FaultKind: TypeAlias = Literal[
    "status",
    "reset",
    "error_after_200",
    "cut_mid_event",
    "invalid_json_args",
    "empty_reply",
    "slow_first_byte",
    "stall",
]
Json: TypeAlias = dict[str, Any]
_STRICT_KEYS = ConfigDict(extra="forbid")  # a typo in a JSON script is an error, not a default


@dataclass(frozen=True)
class FakeUsage:
    """Normalized token counts of a scripted reply; ``output`` includes ``reasoning``. How
    each API reports them is in :mod:`mibyan_jupyter.testing.wire`'s docstring
    (``cache_write`` reaches Anthropic only, ``reasoning`` the OpenAI APIs only)."""

    __pydantic_config__ = _STRICT_KEYS

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


DEFAULT_USAGE = FakeUsage(input=10, output=5)


@dataclass(frozen=True)
class FakeCall:
    """A tool call. A dict ``arguments`` is serialized as the API would (compact for OpenAI,
    spaced for Anthropic); a string is streamed verbatim, so it may be invalid JSON."""

    __pydantic_config__ = _STRICT_KEYS

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    _: KW_ONLY
    id: str | None = None
    """Defaults to ``call_{n}_{i}`` (OpenAI) or ``toolu_{n}_{i}`` (Anthropic), ``n`` being the
    request's number on the server, so ids stay unique across a conversation."""


@dataclass(frozen=True)
class FakeReply:
    """One scripted model reply, encoded in whichever API the request came in on.

    ``stop=None`` means "what a real model would say": tool use when there are calls, else a
    normal stop. ``usage=None`` means the server reports no usage (Anthropic still sends
    zeros). ``signature`` is the Anthropic thinking signature and the Responses
    ``encrypted_content``; it defaults to ``fake-signature-{n}``, and a reasoning item or
    thinking block is sent when ``thinking`` or ``signature`` is set. ``reasoning_key`` is the
    delta field compatible Chat Completions servers use for thinking.
    """

    __pydantic_config__ = _STRICT_KEYS

    text: str = ""
    _: KW_ONLY
    thinking: str = ""
    signature: str | None = None
    calls: Sequence[FakeCall] = ()
    usage: FakeUsage | None = DEFAULT_USAGE
    stop: StopKind | None = None
    chunk_size: int = 8
    reasoning_key: Literal["reasoning_content", "reasoning"] = "reasoning_content"


@dataclass(frozen=True)
class Fault:
    """A scripted failure. Fields used per kind:

    * ``status``: ``status`` (default 500) with the API's JSON error body (``message`` or
      ``body`` override it), ``retry_after`` (seconds, or a string sent verbatim such as an
      HTTP date) and extra ``headers``.
    * ``reset``: nothing; the connection is reset (RST) without a response.
    * ``error_after_200``: HTTP 200, ``after_events`` events of ``reply`` (default 5), then the
      API's in-stream error (``message`` overrides the overloaded text).
    * ``cut_mid_event``: ``after_events`` events (default 5), then half of the next event's
      data line, then the connection closes — abruptly (no final chunk, the client sees a
      protocol error) or, with ``clean_eof``, after a proper end of the chunked body.
    * ``invalid_json_args``: a ``reply`` (default: one call to ``tool``) whose first call's
      arguments are truncated JSON.
    * ``empty_reply``: a completed response with no text and no tool call.
    * ``slow_first_byte``: wait ``seconds`` before the status line, then ``reply``.
    * ``stall``: headers and ``after_events`` events (default 1), wait ``seconds``, then the
      rest of ``reply``.
    """

    __pydantic_config__ = _STRICT_KEYS

    kind: FaultKind
    _: KW_ONLY
    status: int = 500
    message: str | None = None
    retry_after: float | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Json | None = None
    seconds: float = 1.0
    after_events: int | None = None
    clean_eof: bool = False
    reply: FakeReply | None = None
    tool: str = "run_python"


ScriptItem: TypeAlias = FakeReply | Fault


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. ``headers`` keys are lower-case; ``body`` is the
    parsed JSON object (``None`` if the body was not one); ``time`` is ``time.monotonic()``
    on arrival; ``number`` is the 1-based position in ``server.requests`` (reply ids derive
    from it: ``call_{number}_{i}``, ``toolu_{number}_{i}``)."""

    number: int
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Json | None
    raw: bytes
    time: float
    api: ApiMode | None

    @property
    def stream(self) -> bool:
        return bool(self.body and self.body.get("stream"))


Fallback: TypeAlias = Callable[[RecordedRequest], ScriptItem]


def _last_user_text(body: Json) -> str:
    items = body.get("messages", body.get("input"))
    if isinstance(items, str):
        return items
    for message in reversed(items if isinstance(items, list) else []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        parts = content if isinstance(content, list) else []
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts:
            return " ".join(texts)
    return ""


def echo_reply(request: RecordedRequest) -> FakeReply:
    """The demo reply: echoes the last user message's text."""
    text = _last_user_text(request.body or {})
    return FakeReply(
        f"Echo from the fake provider: {text}" if text else "Hello from the fake provider."
    )


_FAULT_ADAPTER: TypeAdapter[Fault] = TypeAdapter(Fault)
_REPLY_ADAPTER: TypeAdapter[FakeReply] = TypeAdapter(FakeReply)


def parse_script(data: object) -> list[ScriptItem]:
    """Script items from JSON data: a list of objects, a fault when it has ``kind``
    (``{"kind": "status", "status": 429, "retry_after": 2}``), else a reply
    (``{"text": "Hi", "calls": [{"name": "f", "arguments": {"x": 1}}]}``)."""
    if not isinstance(data, list):
        raise ValueError("a fake provider script is a JSON list of replies and faults")
    return [
        _FAULT_ADAPTER.validate_python(item)
        if isinstance(item, dict) and "kind" in item
        else _REPLY_ADAPTER.validate_python(item)
        for item in data
    ]


def load_script(path: str | Path) -> list[ScriptItem]:
    """:func:`parse_script` of a JSON file."""
    return parse_script(json.loads(Path(path).read_text(encoding="utf-8")))


FAULT_REPLY = FakeReply("A scripted reply from the fake provider, used by faults that need one.")
"""What ``slow_first_byte``, ``stall``, ``cut_mid_event`` and ``error_after_200`` send when
the fault has no ``reply`` (long enough for five events in every API)."""


def broken_arguments(fault: Fault) -> FakeReply:
    """The ``invalid_json_args`` reply: the first tool call's arguments are JSON cut short."""
    default = FakeCall(fault.tool, {"code": "print(1)"})
    reply = fault.reply or FakeReply(calls=[default])
    calls = list(reply.calls) or [default]
    first = calls[0]
    text = first.arguments if isinstance(first.arguments, str) else json.dumps(first.arguments)
    calls[0] = dataclasses.replace(first, arguments=text[: max(len(text) - 2, 1)])
    return dataclasses.replace(reply, calls=calls)


def retry_after_date(seconds: float) -> str:
    """A ``Retry-After`` HTTP date ``seconds`` from now (whole seconds, as HTTP dates are),
    for ``Fault("status", retry_after=...)``."""
    return email.utils.formatdate(time.time() + seconds, usegmt=True)
