"""Fixtures of the sessions API's tests: one real jupyter server per test module, and the
store it serves, written by the test through the store's own API."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

import httpx
import pytest
from pydantic import TypeAdapter

from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.server.shapes import ErrorJSON, HitJSON, MessageJSON, SessionJSON
from mibyan_jupyter.store import SessionStore
from mibyan_jupyter.store.records import append_message

from .api_server import ApiServer

if importlib.util.find_spec("jupyter_server") is None and os.environ.get("MIBYAN_NO_SKIP") != "1":
    pytest.skip("jupyter_server is not installed", allow_module_level=True)


SECRET = "sk-server-only-0123456789abcdef"
"""A secret only the server's environment holds (under a secret-named variable): what the
API sends must not contain it, even where the stored text does."""


def start_server(
    tmp_path_factory: pytest.TempPathFactory, name: str, *, extra: Sequence[str] = ()
) -> Iterator[ApiServer]:
    server = ApiServer(tmp_path_factory.mktemp(name), extra=extra)
    server.env["MIBYAN_SERVER_TEST_TOKEN"] = SECRET
    server.start()
    try:
        yield server
    finally:
        server.stop()


T = TypeVar("T")


@pytest.fixture(scope="session")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The server of the route and auth tests, one for both modules (its store at
    ``server.db_path``, opened on its first request)."""
    yield from start_server(tmp_path_factory, "api-server")


def shaped(shape: type[T], body: Any) -> T:
    """``body`` validated strictly as ``shape``, with exactly its keys (and those of the
    sessions, hits and messages inside)."""
    value: T = TypeAdapter(shape).validate_python(body, strict=True)
    inner = {"sessions": SessionJSON, "session": SessionJSON, "hits": HitJSON}
    inner["messages"] = MessageJSON
    assert set(body) == set(get_type_hints(shape))
    for key, item_shape in inner.items():
        items = body.get(key) if isinstance(body.get(key), list) else [body.get(key)]
        for item in items:
            if isinstance(item, dict):
                assert set(item) == set(get_type_hints(item_shape)), key
    return value


def error(reply: httpx.Response, status: int, code: str) -> str:
    """The error line of ``reply``, checked to be ``status`` with ``code`` and one line."""
    assert reply.status_code == status, reply.text
    body = shaped(ErrorJSON, reply.json())
    assert body["code"] == code
    assert "\n" not in body["error"]
    assert "Traceback" not in body["error"]
    return body["error"]


@pytest.fixture(scope="session")
def api(api_server: ApiServer) -> Iterator[httpx.Client]:
    with api_server.client() as client:
        yield client


@pytest.fixture
def store(api_server: ApiServer) -> Iterator[SessionStore]:
    """The store the server serves, opened by the test process (as a kernel would)."""
    with SessionStore(api_server.db_path) as opened:
        yield opened


def conversation(prompt: str = "plot the sales") -> list[Message]:
    """A prompt, a reply with a tool call, its result, and a final answer."""
    call = ToolCall(
        id="call-1", function=FunctionCall(name="run_python", arguments='{"code": "1"}')
    )
    return [
        UserMessage(content=prompt),
        AssistantMessage(content="Let me run it.", tool_calls=(call,)),
        ToolMessage(tool_call_id="call-1", name="run_python", content="1"),
        AssistantMessage(content="Done: the answer is **1**."),
    ]


def add_session(
    store: SessionStore,
    title: str = "",
    messages: Sequence[Message] | None = None,
    **fields: Any,
) -> str:
    """A session holding ``messages`` (default: :func:`conversation`); its id."""
    info = store.create(title=title, model="demo:scripted", **fields)
    for message in conversation() if messages is None else messages:
        append_message(store.db, info.id, message)
    if title:
        store.rename(info.id, title)
    return info.id


def add_cost(path: Path, session_id: str, dollars: float) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, model, cost, created_at) VALUES (?, ?, ?, ?)",
            (session_id, "demo:scripted", dollars, time.time()),
        )
