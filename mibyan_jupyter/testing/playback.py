"""What one fake server plays and what it saw: the script FIFO, the request log, the open
connections, the closing flag sleeping faults wait on, and the context window it enforces.

Why a class of its own: the HTTP handler runs on one thread per connection and the test on
another; everything they share is here, behind one lock, so the handler only ever calls
these public methods and the server object only manages the socket's lifecycle.
"""

from __future__ import annotations

import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable

from mibyan_jupyter.testing.context_window import Overflow, check_window, request_tokens
from mibyan_jupyter.testing.scripts import Fallback, RecordedRequest, ScriptItem


class Playback:
    """The script (FIFO, shared by all routes) and the record of every request."""

    def __init__(
        self,
        items: Iterable[ScriptItem] = (),
        *,
        fallback: Fallback | None,
        verbose: bool,
        context_window: int | None = None,
        keep_requests: int | None = None,
    ) -> None:
        self.verbose = verbose
        self.context_window = context_window
        self._fallback = fallback
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque(items)
        # Bounded on request: a long bench must not keep every body it was sent.
        self._requests: deque[RecordedRequest] = deque(maxlen=keep_requests)
        self._count = 0
        self._overflows: list[Overflow] = []
        self._max_tokens = 0
        self._connections: set[socket.socket] = set()
        self._closing = threading.Event()

    def push(self, *items: ScriptItem) -> None:
        """Append replies or faults to the script."""
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

    def record(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        """Log the request ``make`` builds from its 1-based number (numbered in the lock,
        so concurrent requests never share a number)."""
        with self._lock:
            self._count += 1
            request = make(self._count)
            self._requests.append(request)
            return request

    def admit(self, request: RecordedRequest) -> Overflow | None:
        """Count the request's prompt the server's own way
        (:func:`~mibyan_jupyter.testing.context_window.check_window`); the overflow to answer
        with when it does not fit :attr:`context_window`, else ``None``."""
        window = self.context_window
        if window is None or request.api is None:
            return None
        tokens = request_tokens(request.body) if request.body is not None else 0
        overflow = check_window(request.api, request.raw, window)
        with self._lock:
            self._max_tokens = max(self._max_tokens, tokens)
            if overflow is not None:
                self._overflows.append(overflow)
        return overflow

    @property
    def overflows(self) -> list[Overflow]:
        """The requests refused for their size, oldest first (a copy)."""
        with self._lock:
            return list(self._overflows)

    @property
    def max_request_tokens(self) -> int:
        """The largest prompt counted against the window so far (0: none counted)."""
        with self._lock:
            return self._max_tokens

    def next_item(self, request: RecordedRequest) -> ScriptItem | None:
        """The next script item, else the fallback's answer, else ``None`` (a loud 500)."""
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self._fallback(request) if self._fallback else None

    def sleep(self, seconds: float) -> bool:
        """Wait; False when the server closes meanwhile (the handler then gives up)."""
        return not self._closing.wait(seconds)

    def track(self, conn: socket.socket, *, add: bool) -> None:
        """Remember (or forget) an open connection, so closing can shut it down."""
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def start_closing(self) -> bool:
        """Wake sleeping faults for good; False when closing had already started."""
        if self._closing.is_set():
            return False
        self._closing.set()
        return True

    def open_connections(self) -> list[socket.socket]:
        """The connections being served now (to shut them down on close)."""
        with self._lock:
            return list(self._connections)
