"""A loopback fake LLM provider: real HTTP on 127.0.0.1 speaking Chat Completions, Responses
and Anthropic Messages, replaying scripted replies and faults.

Why a real server and not only ``httpx.MockTransport``: timeouts, connection resets, bodies
cut off mid-chunk and slow first bytes only happen on a socket, and users can point a
notebook at it (``python -m mibyan_jupyter.testing``) to try the agent with no
key and no network.

Routes (``/v1`` optional): ``POST /v1/chat/completions``, ``/v1/responses``, ``/v1/messages``.
Each request is recorded first (:attr:`FakeProviderServer.requests`); a server with a
``context_window`` then refuses an oversize one (HTTP 400, the body a real provider sends)
without using a script item. Otherwise it takes the next item of one FIFO shared by all
routes (:class:`FakeReply` or :class:`Fault`). An empty script
answers HTTP 500 saying so, so a test that forgot a reply fails loudly. Streams use chunked
transfer encoding on keep-alive connections, like the real APIs; ``"stream": false`` gets
the equivalent JSON body.

>>> with FakeProviderServer() as server:  # doctest: +SKIP
...     server.push(FakeReply("Hi!"), Fault("status", status=429, retry_after=1))
...     client = httpx.Client(base_url=server.base_url)
"""

from __future__ import annotations

import contextlib
import socket
import threading

from mibyan_jupyter.testing.context_window import Overflow
from mibyan_jupyter.testing.handler import ProviderHttpServer
from mibyan_jupyter.testing.playback import Playback
from mibyan_jupyter.testing.scripts import Fallback, RecordedRequest, ScriptItem

__all__ = ["FakeProviderServer"]


class FakeProviderServer:
    """The fake provider, listening from construction until :meth:`close` (or the end of
    a ``with`` block). ``port=0`` picks a free port; ``fallback`` answers when the script is
    empty (the CLI's demo mode uses
    :func:`~mibyan_jupyter.testing.scripts.echo_reply`), otherwise an empty script is a 500.
    ``context_window`` makes it refuse oversize prompts, counted its own way (so a test never
    grades the agent's estimator with itself); ``keep_requests`` keeps only the last N
    requests in :attr:`requests` (a long benchmark), numbering them all the same.
    """

    def __init__(
        self,
        *items: ScriptItem,
        host: str = "127.0.0.1",
        port: int = 0,
        fallback: Fallback | None = None,
        verbose: bool = False,
        context_window: int | None = None,
        keep_requests: int | None = None,
    ) -> None:
        self.playback = Playback(
            items,
            fallback=fallback,
            verbose=verbose,
            context_window=context_window,
            keep_requests=keep_requests,
        )
        self._httpd = ProviderHttpServer((host, port), self.playback)
        self.host, self.port = host, int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # how soon close() returns
            name=f"fake-provider-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def verbose(self) -> bool:
        """Whether requests are logged to stderr."""
        return self.playback.verbose

    @verbose.setter
    def verbose(self, value: bool) -> None:
        self.playback.verbose = value

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what OpenAI and Anthropic clients take as base URL."""
        return f"{self.url}/v1"

    @property
    def context_window(self) -> int | None:
        """The window (tokens, counted by :mod:`.context_window`) this server enforces:
        a request over it is refused with the HTTP 400 a real provider sends for a prompt
        that is too long. ``None`` (the default): no limit."""
        return self.playback.context_window

    @context_window.setter
    def context_window(self, value: int | None) -> None:
        self.playback.context_window = value

    @property
    def overflows(self) -> list[Overflow]:
        """The requests refused for their size, oldest first (a copy)."""
        return self.playback.overflows

    @property
    def max_request_tokens(self) -> int:
        """The largest prompt counted against :attr:`context_window` so far, in the
        server's own count (0 while no window is set)."""
        return self.playback.max_request_tokens

    def push(self, *items: ScriptItem) -> None:
        """Append replies or faults to the script (FIFO, shared by all routes)."""
        self.playback.push(*items)

    @property
    def pending(self) -> int:
        """Script items not yet used."""
        return self.playback.pending

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, oldest first (a copy)."""
        return self.playback.requests

    def close(self) -> None:
        """Stop serving; open connections are shut down and sleeping faults wake up."""
        if not self.playback.start_closing():
            return
        self._httpd.shutdown()
        for conn in self.playback.open_connections():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeProviderServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
