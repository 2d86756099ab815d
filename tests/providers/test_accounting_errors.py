"""Errors are classified by their code and message, whether a server sends them as an HTTP
status or as an error event inside a stream that began with HTTP 200 (issue 10, item 9).

A 400-class context or token-limit error is ``context_overflow`` with the ``compress`` hint:
not a server error, not retried, not failed over (compaction acts on it). Rate limits and
overloads are retried. Every case runs over real loopback HTTP against the fake server, in
all three wire APIs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mibyan_jupyter.core import RetryNotice, UserMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, StreamError, StreamEvent
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.errors import HINTS, classify_code, classify_stream_error
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, Fault, fake_model

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
HOW = ("status", "error_after_200")


async def no_sleep(seconds: float, signal: AbortSignal) -> bool:
    return signal.aborted


@pytest.fixture
async def client() -> AsyncIterator[ProviderClient]:
    made = ProviderClient(
        retry=RetryPolicy(max_retries=2, sleep=no_sleep), fallback_models=["backup"]
    )
    yield made
    await made.aclose()


async def run(client: ProviderClient, server: FakeProviderServer, mode: str) -> list[StreamEvent]:
    client.register("main", fake_model(server, "main-model", api_mode=mode))
    client.register("backup", fake_model(server, "backup-model", api_mode=mode))
    request = ModelRequest(model="main", system_prompt="", messages=[UserMessage(content="hi")])
    return [event async for event in client(request, AbortSignal())]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
async def test_context_overflow_is_not_retried_and_says_compress(
    fake_provider: FakeProviderServer, client: ProviderClient, mode: str, how: str
) -> None:
    """OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too long"."""
    fake_provider.push(Fault(how, status=400, after_events=2), FakeReply("never sent"))
    events = await run(client, fake_provider, mode)
    final = events[-1]
    assert isinstance(final, StreamError)
    assert final.message.error_kind == "context_overflow"
    assert HINTS["context_overflow"].compress
    assert not HINTS["context_overflow"].retryable
    assert not HINTS["context_overflow"].fall_back
    assert not [e for e in events if e.type in ("retry", "fallback")]
    assert len(fake_provider.requests) == 1
    assert fake_provider.pending == 1


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit"), (529, "overloaded")])
async def test_rate_limits_and_overloads_are_retried(
    fake_provider: FakeProviderServer,
    client: ProviderClient,
    mode: str,
    how: str,
    status: int,
    kind: str,
) -> None:
    fake_provider.push(Fault(how, status=status, after_events=2), FakeReply("second try"))
    events = await run(client, fake_provider, mode)
    assert [e.error_kind for e in events if isinstance(e, RetryNotice)] == [kind]
    final = events[-1]
    assert isinstance(final, StreamDone)
    assert final.message.content == "second try"
    assert [r.body["model"] for r in fake_provider.requests if r.body] == ["main-model"] * 2


@pytest.mark.parametrize("mode", MODES)
async def test_an_invalid_request_in_the_stream_is_not_a_server_error(
    fake_provider: FakeProviderServer, client: ProviderClient, mode: str
) -> None:
    """A 400-class error event whose message is not about the context: ``bad_request``,
    which is neither retried nor failed over (the same request would fail the same way)."""
    payloads = {
        "chat_completions": {
            "error": {"message": "Invalid prompt: flagged", "type": "invalid_request_error"}
        },
        "codex_responses": {
            "type": "error",
            "code": "invalid_prompt",
            "message": "Invalid prompt: flagged",
            "param": None,
            "sequence_number": 2,
        },
        "anthropic_messages": {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "messages: text is empty"},
        },
    }
    fault = Fault("error_after_200", after_events=2, body=payloads[mode])
    fake_provider.push(fault, FakeReply("never sent"))
    events = await run(client, fake_provider, mode)
    final = events[-1]
    assert isinstance(final, StreamError)
    assert final.message.error_kind == "bad_request"
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize(
    ("message", "code", "kind"),
    [
        ("This model's maximum context length is 128000 tokens.", None, "context_overflow"),
        ("anything at all", "context_length_exceeded", "context_overflow"),
        (
            "prompt is too long: 210000 tokens > 200000 maximum",
            "invalid_request_error",
            "context_overflow",
        ),
        ("Your input exceeds the context window of this model.", None, "context_overflow"),
        ("input tokens exceed the configured limit of 272000 tokens", None, "context_overflow"),
        (
            "Rate limit reached for gpt-4o on tokens per min (TPM).",
            "rate_limit_exceeded",
            "rate_limit",
        ),
        ("Too many requests", None, "rate_limit"),
        ("Please generate a shorter reply within the limit", None, "server_error"),
        ("Overloaded", "overloaded_error", "overloaded"),
        ("You exceeded your current quota", "insufficient_quota", "billing"),
        ("Invalid prompt: flagged", "invalid_prompt", "bad_request"),
        ("Internal server error", "api_error", "server_error"),
        ("something broke", None, "server_error"),
    ],
)
def test_stream_error_classification_by_code_then_message(
    message: str, code: str | None, kind: str
) -> None:
    assert classify_stream_error(message, code) == kind


def test_codes_are_read_case_insensitively() -> None:
    assert classify_code("Context_Length_Exceeded") == "context_overflow"
    assert classify_code(None) is None
    assert classify_code("no_such_code") is None
