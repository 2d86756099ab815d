"""A guard that refuses every TCP/UDP connection this process makes to a non-loopback
address, so a test can never reach a real provider (or anything else) by accident.

Why a guard and not only discipline: a model spec with a typo, a default base URL or a
library's telemetry would reach the network silently, and the test would pass or fail for
reasons nobody sees. With the guard installed the attempt raises :class:`NetworkRefused` (a
``RuntimeError``, so retry code that catches ``OSError`` cannot take it for a flaky network)
and is logged in :attr:`NetworkGuard.refusals`, so a test suite can fail even a test whose
code swallowed the exception.

What it patches, on :class:`socket.socket` (so every caller above it is covered: httpx and
httpcore, ``socket.create_connection``, ``ssl``, asyncio's ``loop.create_connection``,
``open_connection`` and datagram endpoints, which all end in these methods): ``connect``,
``connect_ex``, ``sendto`` and ``sendmsg`` with an address. Allowed: ``127.0.0.0/8``, ``::1``
(and IPv4-mapped loopback), names that resolve only to those (``localhost``), and every
family other than IPv4/IPv6 (``AF_UNIX``: a local database server over a unix socket).

What it cannot see: other processes (kernels, JupyterLab, Chromium started by a test) and
sockets opened by C libraries (libzmq, libpq's own sockets) bypass Python's socket module.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any

_INET = (socket.AF_INET, socket.AF_INET6)
_PATCHED = tuple(
    name
    for name in ("connect", "connect_ex", "sendto", "sendmsg")
    if hasattr(socket.socket, name)  # no sendmsg on Windows
)


class NetworkRefused(RuntimeError):
    """A connection to a non-loopback address, refused by :class:`NetworkGuard`."""


def is_loopback_ip(host: str) -> bool:
    """Whether ``host`` is an IP literal in ``127.0.0.0/8`` or ``::1`` (IPv4-mapped too)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone ("fe80::1%eth0")
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resolves_to_loopback(host: str, port: object = None) -> bool:
    """Whether ``host`` (an IP literal or a name such as ``localhost``) means only loopback
    addresses. A name that does not resolve is not loopback."""
    if is_loopback_ip(host):
        return True
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return False  # a literal that is not loopback: no lookup needed
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port if isinstance(port, int) else None)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(is_loopback_ip(str(info[4][0])) for info in infos)


class NetworkGuard:
    """Installs the refusal on :class:`socket.socket` (``install``/``uninstall``, or a
    ``with`` block). One guard at a time per process; installing twice is a no-op."""

    def __init__(self) -> None:
        self.refusals: list[str] = []
        """Every refused attempt, oldest first (``take()`` empties it)."""
        self._lock = threading.Lock()
        self._saved: dict[str, Callable[..., Any]] = {}

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def take(self) -> list[str]:
        """The refusals so far, and forget them (a test that expected them takes them)."""
        with self._lock:
            taken, self.refusals = self.refusals, []
        return taken

    def check(self, sock: socket.socket, address: object, call: str) -> None:
        """Raise :class:`NetworkRefused` (and log it) when ``address`` is not loopback."""
        if sock.family not in _INET or not isinstance(address, tuple) or not address:
            return
        host = str(address[0])
        port = address[1] if len(address) > 1 else None
        if resolves_to_loopback(host, port):
            return
        message = (
            f"network guard: {call}() to {host}:{port} refused; tests reach only loopback "
            "(127.0.0.0/8, ::1): point the code at the fake provider "
            "(mibyan_jupyter.testing.FakeProviderServer) instead"
        )
        with self._lock:
            self.refusals.append(message)
        raise NetworkRefused(message)

    def install(self) -> None:
        if self.installed:
            return
        self._saved = {name: getattr(socket.socket, name) for name in _PATCHED}
        for name in self._saved:
            guarded = self._wrap_sendmsg() if name == "sendmsg" else self._wrap_address(name)
            setattr(socket.socket, name, guarded)

    def uninstall(self) -> None:
        for name, original in self._saved.items():
            setattr(socket.socket, name, original)
        self._saved = {}

    def __enter__(self) -> NetworkGuard:
        self.install()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    def _wrap_address(self, name: str) -> Callable[..., Any]:
        """``socket.socket.<name>`` checking its positional address argument first
        (``connect(address)``; ``sendto(data, address)`` or ``sendto(data, flags, address)``)."""
        original, check = self._saved[name], self.check
        index = -1 if name == "sendto" else 0

        def guarded(sock: socket.socket, *args: Any) -> Any:
            if args:
                try:
                    check(sock, args[index], name)
                except NetworkRefused:
                    if index == 0:  # a refused connect: close it, since callers such as
                        sock.close()  # socket.create_connection only close on OSError
                    raise
            return original(sock, *args)

        guarded.__name__ = guarded.__qualname__ = name
        return guarded

    def _wrap_sendmsg(self) -> Callable[..., Any]:
        """``sendmsg(buffers, ancdata, flags, address)``: checked when an address is given."""
        original, check = self._saved["sendmsg"], self.check

        def sendmsg(sock: socket.socket, *args: Any, **kwargs: Any) -> Any:
            address = args[3] if len(args) > 3 else kwargs.get("address")
            if address is not None:
                check(sock, address, "sendmsg")
            return original(sock, *args, **kwargs)

        return sendmsg
