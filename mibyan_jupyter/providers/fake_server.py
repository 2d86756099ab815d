"""A loopback fake LLM provider: real HTTP on 127.0.0.1 speaking Chat Completions, Responses
and Anthropic Messages, replaying scripted replies and faults.

Why a real server and not only ``httpx.MockTransport``: timeouts, connection resets, bodies
cut off mid-chunk and slow first bytes only happen on a socket, and users can point a
notebook at it (``python -m mibyan_jupyter.providers.fake_server``) to try the agent with no
key and no network.

Routes (``/v1`` optional): ``POST /v1/chat/completions``, ``/v1/responses``, ``/v1/messages``.
Each request takes the next item of one FIFO shared by all routes (:class:`FakeReply` or
:class:`Fault`), and is recorded first (:attr:`FakeProviderServer.requests`). An empty script
answers HTTP 500 saying so, so a test that forgot a reply fails loudly. Streams use chunked
transfer encoding on keep-alive connections, like the real APIs; ``"stream": false`` gets
the equivalent JSON body.

>>> with FakeProviderServer() as server:  # doctest: +SKIP
...     server.push(FakeReply("Hi!"), Fault("status", status=429, retry_after=1))
...     client = httpx.Client(base_url=server.base_url)
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import json
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, assert_never, cast

from mibyan_jupyter.providers._fake_script import (
    DEFAULT_USAGE,
    FAULT_REPLY,
    FakeCall,
    FakeReply,
    FakeUsage,
    Fallback,
    Fault,
    FaultKind,
    RecordedRequest,
    ScriptItem,
    StopKind,
    broken_arguments,
    echo_reply,
    load_script,
    parse_script,
)
from mibyan_jupyter.providers._fake_wire import encode, error_body, stream_error_event
from mibyan_jupyter.providers.base import ApiMode

__all__ = [
    "DEFAULT_USAGE",
    "FakeCall",
    "FakeProviderServer",
    "FakeReply",
    "FakeUsage",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "ScriptItem",
    "StopKind",
    "api_for_path",
    "echo_reply",
    "load_script",
    "main",
    "parse_script",
    "retry_after_date",
]

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


def retry_after_date(seconds: float) -> str:
    """A ``Retry-After`` HTTP date ``seconds`` from now (whole seconds, as HTTP dates are)."""
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection: records each request, then plays the next script item."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the real APIs
    server_version = "FakeProvider/1"

    @property
    def fake(self) -> FakeProviderServer:
        return cast(_HttpServer, self.server).fake

    def setup(self) -> None:
        super().setup()
        # Small SSE writes must leave at once, not wait for Nagle and delayed ACKs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fake._track(self.connection, add=True)

    def finish(self) -> None:
        self.fake._track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        if self.fake.verbose:
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
        item = self.fake._next(request)
        try:
            if item is None:
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
        return self.fake._record(
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

    def _play(self, api: ApiMode, item: ScriptItem, request: RecordedRequest) -> None:
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
                if self.fake._sleep(item.seconds):
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
                after = 5 if item.after_events is None else item.after_events
                self._reply(api, reply, request, error=(after, item.message))
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
        error: tuple[int, str | None] | None = None,
    ) -> None:
        body = request.body or {}
        model, n = str(body.get("model") or "fake-model"), request.number
        encoded = encode(api, reply, model=model, n=n, body=body)
        units = encoded.events if request.stream else [json.dumps(encoded.final).encode()]
        if error is not None:
            after, message = error
            if request.stream:
                kept = units[: min(after, len(units) - 1)]
                event = stream_error_event(
                    api, message=message, model=model, n=n, body=body, sequence=len(kept)
                )
                units = [*kept, event]
            else:  # some compatible servers answer 200 with an error body
                units = [json.dumps(error_body(api, 529, message=message)).encode()]
        self.send_response(200)
        kind = "text/event-stream; charset=utf-8" if request.stream else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_fake{n}")
        self.end_headers()
        for i, unit in enumerate(units):
            if cut is not None and i == min(cut, len(units) - 1):
                self._chunk(_half_event(unit))
                if clean_eof:  # a well-formed end of the body: the connection stays usable
                    self._chunk(b"")
                else:  # no last chunk, then FIN: an abrupt end
                    self.close_connection = True
                return
            if stall is not None and i == stall[0] and not self.fake._sleep(stall[1]):
                self.close_connection = True
                return
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


def _half_event(unit: bytes) -> bytes:
    """``unit`` cut in the middle of its (first) data line."""
    start = unit.find(b"data: ")
    start = 0 if start < 0 else start + len(b"data: ")
    end = unit.find(b"\n", start)
    end = len(unit) if end < 0 else end
    return unit[: start + max((end - start) // 2, 1)]


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: FakeProviderServer) -> None:
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a vanished client is not news
            super().handle_error(request, client_address)


class FakeProviderServer:
    """The fake provider, listening from construction until :meth:`close` (or the end of
    a ``with`` block). ``port=0`` picks a free port; ``fallback`` answers when the script is
    empty (the CLI's demo mode uses :func:`echo_reply`), otherwise an empty script is a 500.
    """

    def __init__(
        self,
        *items: ScriptItem,
        host: str = "127.0.0.1",
        port: int = 0,
        fallback: Fallback | None = None,
        verbose: bool = False,
    ) -> None:
        self.verbose = verbose
        self._fallback = fallback
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque(items)
        self._requests: list[RecordedRequest] = []
        self._connections: set[socket.socket] = set()
        self._closing = threading.Event()
        self._httpd = _HttpServer((host, port), self)
        self.host, self.port = host, int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # how soon close() returns
            name=f"fake-provider-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what OpenAI and Anthropic clients take as base URL."""
        return f"{self.url}/v1"

    def push(self, *items: ScriptItem) -> None:
        """Append replies or faults to the script (FIFO, shared by all routes)."""
        with self._lock:
            self._script.extend(items)

    @property
    def pending(self) -> int:
        """Script items not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def close(self) -> None:
        """Stop serving; open connections are shut down and sleeping faults wake up."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeProviderServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _record(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        with self._lock:
            request = make(len(self._requests) + 1)
            self._requests.append(request)
            return request

    def _next(self, request: RecordedRequest) -> ScriptItem | None:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self._fallback(request) if self._fallback else None

    def _sleep(self, seconds: float) -> bool:
        """Wait; False when the server closes meanwhile (the handler then gives up)."""
        return not self._closing.wait(seconds)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mibyan_jupyter.providers.fake_server [--port N] [--script FILE.json]``."""
    parser = argparse.ArgumentParser(
        prog="python -m mibyan_jupyter.providers.fake_server",
        description="A fake LLM provider on localhost speaking the OpenAI Chat Completions, "
        "OpenAI Responses and Anthropic Messages APIs. Without --script it echoes the last "
        "user message; with one it plays the script's replies and faults in order.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--script", help="JSON list of replies and faults")
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    args = parser.parse_args(argv)
    items = load_script(args.script) if args.script else []
    fallback = None if args.script else echo_reply
    with FakeProviderServer(
        *items, host=args.host, port=args.port, fallback=fallback, verbose=not args.quiet
    ) as server:
        print(f"Fake provider listening on {server.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
