"""A model call that fails for good names the endpoint it failed at (no credentials, no
query string) and what to do: a provider that is down said only "connection: ConnectError".
Over real loopback HTTP: a port nobody listens on, and the fake server refusing the key
(the cell's one red line: tests/jupyter/test_cell_errors.py)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from mibyan_jupyter.core import UserMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamError
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.errors import ProviderError, at_endpoint, endpoint_text
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import resolve_model
from mibyan_jupyter.testing import FakeProviderServer, Fault, fake_model


async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
    return signal.aborted


@pytest.fixture
async def client() -> AsyncIterator[ProviderClient]:
    made = ProviderClient(retry=RetryPolicy(max_retries=1, sleep=no_sleep))
    yield made
    await made.aclose()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def final_error(client: ProviderClient) -> str:
    request = ModelRequest(model="main", system_prompt="", messages=[UserMessage(content="hi")])
    events = [event async for event in client(request, AbortSignal())]
    final = events[-1]
    assert isinstance(final, StreamError)
    return final.message.error_message or ""


async def test_a_provider_that_is_down_names_its_url_and_what_to_do(
    client: ProviderClient,
) -> None:
    port = closed_port()
    client.register("main", resolve_model(f"fake:m@http://127.0.0.1:{port}/v1"))
    message = await final_error(client)
    assert "connection" in message
    assert f"POST http://127.0.0.1:{port}/v1/chat/completions" in message
    assert "is the server running" in message


async def test_a_refused_key_names_the_endpoint_and_says_check_the_key(
    fake_provider: FakeProviderServer, client: ProviderClient
) -> None:
    fake_provider.push(Fault("status", status=401, message="invalid api key"))
    client.register("main", fake_model(fake_provider))
    message = await final_error(client)
    assert f"POST {fake_provider.base_url}" in message
    assert "check the API key" in message


def test_the_endpoint_shown_has_no_credentials_and_no_query() -> None:
    shown = endpoint_text("https://user:pw@example.test/v1/chat?key=abc#frag")
    assert shown == "https://example.test/v1/chat"
    error = ProviderError("bad_request", "nope")  # not one the endpoint helps with
    assert at_endpoint(error, "http://x") is error
