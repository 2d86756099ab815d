"""The suite's network guard (tests/conftest.py) refuses every connection that leaves
loopback, through every way a test could make one, and lets loopback and unix sockets be."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mibyan_jupyter.testing import FakeProviderServer, FakeReply, NetworkGuard, NetworkRefused

PRIVATE = ("10.255.255.1", 9)  # unroutable: without the guard this would hang, not fail
PUBLIC = ("1.1.1.1", 443)


def refused_once(guard: NetworkGuard, where: str) -> None:
    """The guard logged exactly one refusal, naming the address (and takes it)."""
    refusals = guard.take()
    assert len(refusals) == 1, refusals
    assert where in refusals[0]
    assert "network guard" in refusals[0]
    assert "loopback" in refusals[0]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A real TCP server on 127.0.0.1 that answers each connection with b"pong"."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)  # so the thread sees ``stop`` soon (close() does not wake accept)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with conn:
                conn.recv(16)
                conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def test_the_guard_is_installed_for_the_session(network_guard: NetworkGuard) -> None:
    assert network_guard.installed


def test_tcp_to_a_private_address_is_refused(network_guard: NetworkGuard) -> None:
    with pytest.raises(NetworkRefused, match=r"connect\(\) to 10\.255\.255\.1:9 refused"):
        socket.create_connection(PRIVATE, timeout=1)
    refused_once(network_guard, "10.255.255.1:9")
    with socket.socket() as sock, pytest.raises(NetworkRefused):
        sock.connect_ex(PRIVATE)
    refused_once(network_guard, "connect_ex() to 10.255.255.1:9")


def test_http_to_a_public_address_is_refused_not_retried(network_guard: NetworkGuard) -> None:
    """httpx does not turn the refusal into a ConnectError that retry code would retry."""
    with (
        httpx.Client(timeout=2, verify=False) as client,
        pytest.raises(NetworkRefused, match=r"1\.1\.1\.1:443"),
    ):
        client.get("https://1.1.1.1/")
    refused_once(network_guard, "1.1.1.1:443")


async def test_asyncio_connections_are_refused(network_guard: NetworkGuard) -> None:
    with pytest.raises(NetworkRefused):
        await asyncio.wait_for(asyncio.open_connection(*PRIVATE), timeout=5)
    refused_once(network_guard, "10.255.255.1:9")
    loop = asyncio.get_running_loop()
    with pytest.raises(NetworkRefused):
        await loop.create_datagram_endpoint(asyncio.DatagramProtocol, remote_addr=PUBLIC)
    refused_once(network_guard, "1.1.1.1:443")


def test_udp_datagrams_are_refused(network_guard: NetworkGuard) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        with pytest.raises(NetworkRefused, match=r"sendto\(\) to 1\.1\.1\.1:443"):
            sock.sendto(b"x", PUBLIC)
        refused_once(network_guard, "1.1.1.1:443")
        with pytest.raises(NetworkRefused):
            sock.sendto(b"x", 0, PUBLIC)
        refused_once(network_guard, "1.1.1.1:443")
        with pytest.raises(NetworkRefused):
            sock.sendmsg([b"x"], [], 0, PUBLIC)
        refused_once(network_guard, "sendmsg() to 1.1.1.1:443")


def test_ipv6_outside_loopback_is_refused(network_guard: NetworkGuard) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        pytest.skip("IPv6 sockets are disabled here")
    with sock, pytest.raises(NetworkRefused):
        sock.connect(("2606:4700:4700::1111", 443, 0, 0))
    refused_once(network_guard, "2606:4700:4700::1111:443")


def test_a_swallowed_refusal_is_still_logged(network_guard: NetworkGuard) -> None:
    """Code that catches everything cannot hide the attempt: the suite's autouse fixture
    fails the test from the log (this test takes the entry it expects)."""
    with contextlib.suppress(Exception):
        socket.create_connection(PUBLIC, timeout=1)
    refused_once(network_guard, "1.1.1.1:443")


def test_loopback_still_works(listener: socket.socket, network_guard: NetworkGuard) -> None:
    port = listener.getsockname()[1]
    for host in ("127.0.0.1", "localhost"):
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(b"ping")
            assert sock.recv(16) == b"pong"
    assert network_guard.refusals == []


async def test_loopback_works_through_asyncio(listener: socket.socket) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
    writer.write(b"ping")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(16), timeout=5) == b"pong"
    writer.close()
    await writer.wait_closed()


async def test_loopback_http_reaches_the_fake_provider() -> None:
    with FakeProviderServer(FakeReply("hi")) as server:
        async with httpx.AsyncClient(base_url=server.base_url, verify=False) as client:
            body = {"model": "m", "messages": [{"role": "user", "content": "?"}]}
            response = await client.post("/chat/completions", json=body)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "hi"


def test_unix_sockets_are_allowed(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            conn, _ = server.accept()
            with conn:
                client.sendall(b"ok")
                assert conn.recv(2) == b"ok"


def test_the_guard_undoes_itself() -> None:
    """A second guard in a ``with`` block restores what it found (the session's guard)."""
    before = socket.socket.connect
    with NetworkGuard() as inner:
        assert socket.socket.connect is not before
        assert inner.installed
    assert socket.socket.connect is before
