"""What one fake server plays and what it saw: the script FIFO, the request log, the open
connections, and the closing flag sleeping faults wait on.

Why a class of its own: the HTTP handler runs on one thread per connection and the test on
another; everything they share is here, behind one lock, so the handler only ever calls
these public methods and the server object only manages the socket's lifecycle.
"""

from __future__ import annotations

import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable

from mibyan_jupyter.testing.scripts import Fallback, RecordedRequest, ScriptItem


class Playback:
    """The script (FIFO, shared by all routes) and the record of every request."""

    def __init__(
        self, items: Iterable[ScriptItem] = (), *, fallback: Fallback | None, verbose: bool
    ) -> None:
        self.verbose = verbose
        self._fallback = fallback
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque(items)
        self._requests: list[RecordedRequest] = []
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
            request = make(len(self._requests) + 1)
            self._requests.append(request)
            return request

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
