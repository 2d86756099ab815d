"""The fake server's own context window, over real loopback HTTP (issue 10, item 3): a
request past ``FakeProviderServer(context_window=N)`` is refused with the HTTP 400 body a
real provider sends, counted the server's own way (``testing.context_window``), without
using a script item; the client maps it to ``context_overflow`` with the compress hint."""

from __future__ import annotations

import pytest

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, StreamError, StreamEvent
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.errors import HINTS
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model
from mibyan_jupyter.testing.context_window import request_tokens

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
WINDOW = 1_000


async def ask(server: FakeProviderServer, mode: str, text: str) -> list[StreamEvent]:
    client = ProviderClient()
    try:
        client.register("main", fake_model(server, api_mode=mode))
        request = ModelRequest(
            model="main", system_prompt="sys", messages=[UserMessage(content=text)]
        )
        return [event async for event in client(request, AbortSignal())]
    finally:
        await client.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_an_oversize_request_is_refused_as_context_overflow(mode: str) -> None:
    with FakeProviderServer(FakeReply("fits"), context_window=WINDOW) as server:
        big = await ask(server, mode, "x" * (WINDOW * 4))
        final = big[-1]
        assert isinstance(final, StreamError)
        assert final.message.error_kind == "context_overflow"
        assert HINTS["context_overflow"].compress
        assert not HINTS["context_overflow"].retryable
        assert len(server.requests) == 1  # not retried: the same prompt would fail the same way
        assert server.pending == 1  # the refusal used no script item
        (overflow,) = server.overflows
        assert overflow.window == WINDOW
        assert overflow.tokens > WINDOW
        assert overflow.status == 400
        body = server.requests[0].body
        assert body is not None
        assert overflow.tokens == request_tokens(body)

        small = await ask(server, mode, "hello")
        assert isinstance(small[-1], StreamDone)
        assert small[-1].message.content == "fits"
        assert server.pending == 0
        assert len(server.overflows) == 1
        assert server.max_request_tokens == overflow.tokens  # the largest counted so far


async def test_the_window_can_be_set_later_and_lifted() -> None:
    with FakeProviderServer(FakeReply("a"), FakeReply("b")) as server:
        assert server.context_window is None
        assert server.max_request_tokens == 0
        server.context_window = 10
        refused = await ask(server, "chat_completions", "y" * 200)
        assert isinstance(refused[-1], StreamError)
        server.context_window = None
        passed = await ask(server, "chat_completions", "y" * 200)
        assert isinstance(passed[-1], StreamDone)


async def test_keep_requests_bounds_the_log_but_numbers_every_request() -> None:
    with FakeProviderServer(*(FakeReply(str(i)) for i in range(3)), keep_requests=2) as server:
        for _ in range(3):
            assert isinstance((await ask(server, "chat_completions", "hi"))[-1], StreamDone)
        assert [request.number for request in server.requests] == [2, 3]
