"""Test helpers for code built on mibyan-jupyter: a loopback fake LLM provider speaking the
three wire APIs, the replies and faults it plays, model specs that point at it, and a guard
that refuses any connection not to loopback.

Why it ships with the package (as pydantic-ai ships its test models): users test their own
tools and notebooks against the same fake server this project's tests use, over real HTTP
on 127.0.0.1, with no key and no network. Nothing outside this package imports it, so it
costs nothing to a kernel that never tests.

    from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model

    with FakeProviderServer(FakeReply("Hi!")) as server:
        client.register("main", fake_model(server))

``python -m mibyan_jupyter.testing`` serves it from the command line (see :mod:`.cli`).
"""

from mibyan_jupyter.testing.fake_server import FakeProviderServer
from mibyan_jupyter.testing.handler import api_for_path
from mibyan_jupyter.testing.network import NetworkGuard, NetworkRefused
from mibyan_jupyter.testing.scripts import (
    DEFAULT_USAGE,
    FakeCall,
    FakeReply,
    FakeUsage,
    Fault,
    FaultKind,
    RecordedRequest,
    ScriptItem,
    StopKind,
    echo_reply,
    load_script,
    parse_script,
    retry_after_date,
)
from mibyan_jupyter.testing.specs import fake_model

__all__ = [
    "DEFAULT_USAGE",
    "FakeCall",
    "FakeProviderServer",
    "FakeReply",
    "FakeUsage",
    "Fault",
    "FaultKind",
    "NetworkGuard",
    "NetworkRefused",
    "RecordedRequest",
    "ScriptItem",
    "StopKind",
    "api_for_path",
    "echo_reply",
    "fake_model",
    "load_script",
    "parse_script",
    "retry_after_date",
]
