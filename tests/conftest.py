"""Shared fixtures. Tests never reach the network: the only server is on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mibyan_jupyter.providers.fake_server import FakeProviderServer


@pytest.fixture
def fake_provider() -> Iterator[FakeProviderServer]:
    """A loopback server speaking the three wire APIs; push replies and faults to it."""
    with FakeProviderServer() as server:
        yield server
