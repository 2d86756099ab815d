"""The fake provider's HTTP side: one handler per connection that records each request and
plays the next script item over the wire (replies, statuses, resets, stalls, cuts).

A server given a context window counts every request first (``Playback.admit``) and
refuses an oversize one with the HTTP 400 a real provider sends, without using a script item.

Why the standard library's ``http.server``: the faults need control of the socket itself
(RST with ``SO_LINGER`` 0, a chunked body cut mid-event, no final chunk) that an ASGI server
would hide, and it adds no dependency for users who test with it.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, assert_never, cast

from mibyan_jupyter.providers.base import ApiMode
from mibyan_jupyter.testing.playback import Playback
from mibyan_jupyter.testing.scripts import (
    FAULT_REPLY,
    FakeReply,
    Fault,
    RecordedRequest,
    ScriptItem,
    broken_arguments,
)
from mibyan_jupyter.testing.wire import encode, error_body, stream_error_event
from mibyan_jupyter.testing.wire.raw import RawReply, raw_json

EMPTY_SCRIPT = "fake provider: the script is empty (push a FakeReply or Fault before this request)"
_ROUTES: dict[str, ApiMode] = {
    "/chat/completions": "chat_completions",
    "/responses": "codex_responses",
    "/messages": "anthropic_messages",
}


def api_for_path(path: str) -> ApiMode | None:
    """The wire API a request path speaks (``/v1`` prefix optional, query ignored)."""
    path = path.partition("?")[0].rstrip("/")
    return _ROUTES.get(path.removeprefix("/v1"))


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection: records each request, then plays the next script item."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the real APIs
    server_version = "FakeProvider/1"

    @property
    def playback(self) -> Playback:
        return cast(ProviderHttpServer, self.server).playback

    def setup(self) -> None:
        super().setup()
        # Small SSE writes must leave at once, not wait for Nagle and delayed ACKs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.playback.track(self.connection, add=True)

    def finish(self) -> None:
        self.playback.track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        if self.playback.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._record(b"")
        self._json(404, {"error": {"message": f"fake provider: no route for GET {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = self._record(self.rfile.read(length))
        if request.api is None:
            message = f"fake provider: no route for POST {request.path}"
            self._json(404, {"error": {"message": message, "type": "not_found"}})
            return
        overflow = self.playback.admit(request)
        # A refused request uses no script item, as a real API refuses before it generates.
        item = None if overflow is not None else self.playback.next_item(request)
        try:
            if overflow is not None:
                self._json(overflow.status, overflow.body)
            elif item is None:
                self._json(500, error_body(request.api, 500, message=EMPTY_SCRIPT))
            else:
                self._play(request.api, item, request)
        except OSError:  # the client went away (its timeout, a cancel): nothing to tell it
            self.close_connection = True

    def _record(self, raw: bytes) -> RecordedRequest:
        path, _, query = self.path.partition("?")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return self.playback.record(
            lambda number: RecordedRequest(
                number=number,
                method=self.command,
                path=path,
                query=query,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body if isinstance(body, dict) else None,
                raw=raw,
                time=time.monotonic(),
                api=api_for_path(path),
            )
        )

    def _play(self, api: ApiMode, item: ScriptItem | RawReply, request: RecordedRequest) -> None:
        if isinstance(item, RawReply):
            units = item.encoded() if request.stream else [raw_json(item)]
            self._send(units, request)
            return
        if isinstance(item, FakeReply):
            self._reply(api, item, request)
            return
        reply = item.reply or FAULT_REPLY
        match item.kind:
            case "status":
                model = str((request.body or {}).get("model", ""))
                body = item.body or error_body(api, item.status, message=item.message, model=model)
                headers = dict(item.headers)
                if item.retry_after is not None:
                    value = item.retry_after
                    headers["Retry-After"] = value if isinstance(value, str) else f"{value:g}"
                self._json(item.status, body, headers)
            case "reset":
                self._reset()
            case "slow_first_byte":
                if self.playback.sleep(item.seconds):
                    self._reply(api, reply, request)
                else:
                    self.close_connection = True
            case "stall":
                stall = (1 if item.after_events is None else item.after_events, item.seconds)
                self._reply(api, reply, request, stall=stall)
            case "cut_mid_event":
                cut = 5 if item.after_events is None else item.after_events
                self._reply(api, reply, request, cut=cut, clean_eof=item.clean_eof)
            case "error_after_200":
                # The default status (500) keeps the overloaded event; another status sends
                # that status's error in the stream's shape; a body is sent as the event.
                after = 5 if item.after_events is None else item.after_events
                status = None if item.status == 500 else item.status
                self._reply(api, reply, request, error=_StreamFault(after, item, status))
            case "invalid_json_args":
                self._reply(api, broken_arguments(item), request)
            case "empty_reply":
                self._reply(api, FakeReply(), request)
            case _:
                assert_never(item.kind)

    def _reply(
        self,
        api: ApiMode,
        reply: FakeReply,
        request: RecordedRequest,
        *,
        stall: tuple[int, float] | None = None,
        cut: int | None = None,
        clean_eof: bool = False,
        error: _StreamFault | None = None,
    ) -> None:
        body = request.body or {}
        model, n = str(body.get("model") or "fake-model"), request.number
        encoded = encode(api, reply, model=model, n=n, body=body)
        units = encoded.events if request.stream else [json.dumps(encoded.final).encode()]
        if error is not None:
            units = self._with_error(api, units, request, error)
        self._begin(request)
        for i, unit in enumerate(units):
            if cut is not None and i == min(cut, len(units) - 1):
                self._chunk(_half_event(unit))
                if clean_eof:  # a well-formed end of the body: the connection stays usable
                    self._chunk(b"")
                else:  # no last chunk, then FIN: an abrupt end
                    self.close_connection = True
                return
            if stall is not None and i == stall[0] and not self.playback.sleep(stall[1]):
                self.close_connection = True
                return
            self._chunk(unit)
        self._chunk(b"")

    @staticmethod
    def _with_error(
        api: ApiMode, units: list[bytes], request: RecordedRequest, error: _StreamFault
    ) -> list[bytes]:
        """The first ``error.after`` events, then the in-stream error event."""
        body = request.body or {}
        model, message = str(body.get("model") or "fake-model"), error.fault.message
        if not request.stream:  # some compatible servers answer 200 with an error body
            return [json.dumps(error_body(api, 529, message=message)).encode()]
        kept = units[: min(error.after, len(units) - 1)]
        event = stream_error_event(
            api,
            message=message,
            model=model,
            n=request.number,
            body=body,
            sequence=len(kept),
            status=error.status,
            payload=error.fault.body,
        )
        return [*kept, event]

    def _begin(self, request: RecordedRequest) -> None:
        """The status line and headers of a 200 reply (chunked, as the real APIs send)."""
        self.send_response(200)
        kind = "text/event-stream; charset=utf-8" if request.stream else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_fake{request.number}")
        self.end_headers()

    def _send(self, units: list[bytes], request: RecordedRequest) -> None:
        """A 200 reply of ``units``, one chunk each, then the last chunk."""
        self._begin(request)
        for unit in units:
            self._chunk(unit)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _reset(self) -> None:
        """Close with SO_LINGER 0: the kernel sends RST instead of FIN, and no response."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # drops the makefile reference, so close() below is the real one
        self.connection.close()


@dataclass(frozen=True, slots=True)
class _StreamFault:
    """An ``error_after_200`` fault as played: after how many events, with which status
    (``None``: the default overloaded event), the fault itself (message, body)."""

    after: int
    fault: Fault
    status: int | None


def _half_event(unit: bytes) -> bytes:
    """``unit`` cut in the middle of its (first) data line."""
    start = unit.find(b"data: ")
    start = 0 if start < 0 else start + len(b"data: ")
    end = unit.find(b"\n", start)
    end = len(unit) if end < 0 else end
    return unit[: start + max((end - start) // 2, 1)]


class ProviderHttpServer(ThreadingHTTPServer):
    """A threading HTTP server whose handlers play ``playback`` (daemon threads: a stalled
    fault never keeps the process alive)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], playback: Playback) -> None:
        super().__init__(address, _Handler)
        self.playback = playback

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a vanished client is not news
            super().handle_error(request, client_address)
