"""Shared fixtures. Tests never reach the network: the only server is on 127.0.0.1.

The network guard (``mibyan_jupyter.testing.NetworkGuard``) is installed for the whole session
and refuses, loudly, any TCP/UDP connection from this pytest process to an address outside
127.0.0.0/8 and ::1 (unix sockets stay allowed: a local PostgreSQL is reached over one).
It is in-process only: subprocesses a test starts (kernels, nbclient, JupyterLab, Chromium,
the fake server's CLI) and C libraries with their own sockets (libzmq) are not covered, so
those tests point them at loopback addresses themselves. Package registries (pip, npm, apt)
are reached only by the Makefile's setup targets, never by a test.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from mibyan_jupyter.testing import FakeProviderServer, NetworkGuard

pytest_plugins = ["pg_server"]  # the throwaway PostgreSQL's fixtures (tests/pg_server.py)

# Saved approval rules are signed with a per-user key file (store/approval_rules.py): the
# tests, and the kernels and servers they start, use one of their own, never the user's.
os.environ.setdefault(
    "MIBYAN_RULE_KEY", os.path.join(tempfile.mkdtemp(prefix="mibyan-rule-key-"), "rule-key")
)

_GUARD = NetworkGuard()


@pytest.fixture(scope="session", autouse=True)
def _shells_leave_quietly() -> Iterator[None]:
    """Every IPython shell a test made registered an exit handler that resets it, and each
    reset runs a full ``gc.collect()`` (~60 ms on this suite's heap): hundreds of shells made
    the process take ~30 s to exit after the last test. Those shells are done with by then
    (their history is in memory or in a temporary folder), so their handlers are dropped."""
    yield
    import atexit
    import gc
    import sys

    shell_module = sys.modules.get("IPython.core.interactiveshell")
    if shell_module is None:
        return
    for obj in gc.get_objects():
        if isinstance(obj, shell_module.InteractiveShell):
            atexit.unregister(obj.atexit_operations)


@pytest.fixture(scope="session", autouse=True)
def network_guard() -> Iterator[NetworkGuard]:
    """The session's network guard (installed before the first test, removed after the last)."""
    _GUARD.install()
    try:
        yield _GUARD
    finally:
        _GUARD.uninstall()


@pytest.fixture(autouse=True)
def _no_refused_connections(network_guard: NetworkGuard) -> Iterator[None]:
    """Fails a test that tried to leave loopback, even when its code swallowed the refusal
    (a test that expects refusals calls ``network_guard.take()``)."""
    network_guard.take()
    yield
    refused = network_guard.take()
    if refused:
        pytest.fail("\n".join(refused), pytrace=False)


@pytest.fixture
def fake_provider() -> Iterator[FakeProviderServer]:
    """A loopback server speaking the three wire APIs; push replies and faults to it."""
    with FakeProviderServer() as server:
        yield server
