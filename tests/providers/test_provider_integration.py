"""The real httpx adapters against the loopback fake server, through the core loop.

Every wire API, every fault; retries use an injected sleep (no real waiting), so the
timing asserted is the policy's, not the machine's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from support import Recorder, check_grammar

from mibyan_jupyter.core import (
    Agent,
    AgentEnd,
    AssistantMessage,
    FallbackNotice,
    RetryNotice,
    ToolMessage,
    tool,
)
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import ModelSpec, resolve_model
from mibyan_jupyter.testing import (
    FakeCall,
    FakeProviderServer,
    FakeReply,
    FakeUsage,
    Fault,
    fake_model,
)

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
SECRET = "sk-test-secret-key-1234567890"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def server(fake_provider: FakeProviderServer) -> FakeProviderServer:
    return fake_provider


_OPEN: list[ProviderClient] = []


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """Every ProviderClient made in a test releases its connections at the end."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def tracked(client: ProviderClient) -> ProviderClient:
    _OPEN.append(client)
    return client


class Sleeps:
    """An injected retry sleep: records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float, signal: AbortSignal) -> bool:
        self.delays.append(seconds)
        return signal.aborted


def client_for(
    server: FakeProviderServer,
    mode: str,
    *,
    sleeps: Sleeps | None = None,
    max_retries: int = 3,
    fallback: tuple[str, ...] = (),
    **options: object,
) -> ProviderClient:
    client = tracked(
        ProviderClient(
            retry=RetryPolicy(max_retries=max_retries, sleep=sleeps or Sleeps(), jitter=0.0),
            fallback_models=fallback,
            **options,  # type: ignore[arg-type]
        )
    )
    client.register("main", fake_model(server, "main-model", api_mode=mode))
    client.register("backup", fake_model(server, "backup-model", api_mode=mode))
    return client


def agent_for(client: ProviderClient, recorder: Recorder) -> Agent:
    agent = Agent(stream_fn=client, model="main", tools=[add])
    agent.subscribe(recorder)
    return agent


@pytest.mark.parametrize("mode", MODES)
async def test_tool_turn_and_answer_over_real_http(server: FakeProviderServer, mode: str) -> None:
    server.push(
        FakeReply(
            "Let me add.",
            thinking="Adding is easy.",
            calls=[FakeCall("add", {"a": 2, "b": 3})],
            usage=FakeUsage(input=40, output=12),
        ),
        FakeReply("It is 5.", usage=FakeUsage(input=60, output=4)),
    )
    recorder = Recorder()
    agent = agent_for(client_for(server, mode), recorder)
    assert await agent.achat("2+3?") == "It is 5."
    check_grammar(recorder.events)
    assistant, result, final = agent.state.messages[1:]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].function.name == "add"
    assert json.loads(assistant.tool_calls[0].function.arguments) == {"a": 2, "b": 3}
    assert assistant.stop_reason == "tool_use"
    assert assistant.usage.input + assistant.usage.cache_read == 40
    assert assistant.usage.output == 12
    assert assistant.usage.cost == 0.0  # a local/fake provider costs a known zero
    assert assistant.api == mode
    assert isinstance(result, ToolMessage)
    assert result.content == "5"
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "stop"
    # the second request carried the tool result in this API's own shape
    body = json.dumps(server.requests[1].body)
    assert assistant.tool_calls[0].id in body
    deltas = [e for e in recorder.types(updates=True) if e == "message_update"]
    assert len(deltas) > 4  # streamed, not delivered in one piece


@pytest.mark.parametrize("mode", MODES)
async def test_rate_limit_honours_retry_after(server: FakeProviderServer, mode: str) -> None:
    server.push(Fault("status", status=429, retry_after=7), FakeReply("fine"))
    sleeps = Sleeps()
    recorder = Recorder()
    agent = agent_for(client_for(server, mode, sleeps=sleeps), recorder)
    assert await agent.achat("hi") == "fine"
    assert sleeps.delays == [7.0]
    notices = recorder.of(RetryNotice)
    assert [(n.attempt, n.error_kind, n.delay) for n in notices] == [(1, "rate_limit", 7.0)]
    check_grammar(recorder.events)


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("status", status=500), "server_error"),
        (Fault("status", status=529), "overloaded"),
        (Fault("status", status=503), "overloaded"),
        (Fault("reset"), "connection"),
        (Fault("error_after_200"), None),
        (Fault("cut_mid_event"), "connection"),
        (Fault("cut_mid_event", clean_eof=True), "format_error"),
    ],
    ids=["500", "529", "503", "reset", "error-after-200", "cut", "cut-clean-eof"],
)
@pytest.mark.parametrize("mode", MODES)
async def test_transient_faults_are_retried(
    server: FakeProviderServer, mode: str, fault: Fault, kind: str | None
) -> None:
    server.push(fault, FakeReply("recovered"))
    sleeps = Sleeps()
    recorder = Recorder()
    agent = agent_for(client_for(server, mode, sleeps=sleeps), recorder)
    assert await agent.achat("hi") == "recovered"
    notices = recorder.of(RetryNotice)
    assert len(notices) == 1
    if kind is not None:
        assert notices[0].error_kind == kind
    assert sleeps.delays == [1.0]  # first backoff step, jitter off
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.content == "recovered"  # what streamed before the failure was dropped
    check_grammar(recorder.events)


async def test_backoff_grows_then_the_error_is_reported(server: FakeProviderServer) -> None:
    server.push(*[Fault("status", status=500, message="boom")] * 3)
    sleeps = Sleeps()
    recorder = Recorder()
    agent = agent_for(
        client_for(server, "chat_completions", sleeps=sleeps, max_retries=2), recorder
    )
    assert await agent.achat("hi") == ""
    assert sleeps.delays == [1.0, 2.0]
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "error"
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "error"
    assert final.error_message is not None
    assert "HTTP 500 server_error: boom" in final.error_message
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "context_overflow"), (400, None), (401, "auth"), (404, "model_not_found")],
)
async def test_client_errors_are_not_retried(
    server: FakeProviderServer, status: int, kind: str | None
) -> None:
    fault = (
        Fault("status", status=status)
        if kind
        else Fault(
            "status",
            status=400,
            body={
                "error": {
                    "message": "Invalid parameter: temperature",
                    "type": "invalid_request_error",
                    "code": "invalid_parameter",
                }
            },
        )
    )
    server.push(fault)
    sleeps = Sleeps()
    agent = agent_for(client_for(server, "chat_completions", sleeps=sleeps), Recorder())
    await agent.achat("hi")
    assert sleeps.delays == []
    assert len(server.requests) == 1
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.error_message is not None
    assert (kind or "bad_request") in final.error_message
    assert final.error_kind == (kind or "bad_request")


@pytest.mark.parametrize("mode", MODES)
async def test_invalid_tool_arguments_become_an_error_result(
    server: FakeProviderServer, mode: str
) -> None:
    server.push(Fault("invalid_json_args", tool="add"), FakeReply("sorry"))
    recorder = Recorder()
    agent = agent_for(client_for(server, mode), recorder)
    assert await agent.achat("go") == "sorry"
    result = agent.state.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "Invalid arguments for add" in str(result.content)
    check_grammar(recorder.events)


@pytest.mark.parametrize("mode", MODES)
async def test_empty_replies_fail_over_with_incomplete_response(
    server: FakeProviderServer, mode: str
) -> None:
    server.push(
        Fault("empty_reply"), Fault("empty_reply"), Fault("empty_reply"), FakeReply("from backup")
    )
    recorder = Recorder()
    agent = agent_for(client_for(server, mode, fallback=("backup",)), recorder)
    assert await agent.achat("hi") == "from backup"
    fallbacks = recorder.of(FallbackNotice)
    assert [(f.from_model, f.to_model, f.reason) for f in fallbacks] == [
        ("main", "backup", "incomplete_response")
    ]
    assert [n.error_kind for n in recorder.of(RetryNotice)] == ["incomplete_response"] * 2
    models = [r.body["model"] for r in server.requests if r.body]
    assert models == ["main-model"] * 3 + ["backup-model"]
    check_grammar(recorder.events)


async def test_fallback_gets_one_grace_call_when_the_budget_is_used_up(
    server: FakeProviderServer,
) -> None:
    server.push(
        Fault("empty_reply"), Fault("empty_reply"), Fault("empty_reply"), FakeReply("grace answer")
    )
    client = client_for(server, "chat_completions", fallback=("backup",), max_calls=3)
    agent = agent_for(client, Recorder())
    assert await agent.achat("hi") == "grace answer"
    assert client.calls == 4
    # the grace call was exactly one: the next request finds the budget used up
    server.push(FakeReply("never sent"))
    await agent.achat("again")
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.error_message is not None
    assert "budget" in final.error_message
    assert server.pending == 1


async def test_failover_after_server_errors(server: FakeProviderServer) -> None:
    server.push(
        Fault("status", status=500), Fault("status", status=500), FakeReply("backup answer")
    )
    recorder = Recorder()
    agent = agent_for(
        client_for(server, "chat_completions", max_retries=1, fallback=("backup",)), recorder
    )
    assert await agent.achat("hi") == "backup answer"
    assert [(f.to_model, f.reason) for f in recorder.of(FallbackNotice)] == [
        ("backup", "server_error")
    ]


async def test_credential_refresh_is_tried_once_before_failing_over(
    server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIBYAN_TEST_KEY", "sk-old-key-000000001")
    refreshed: list[str] = []

    def refresh(spec: ModelSpec) -> None:
        refreshed.append(spec.model_id)
        monkeypatch.setenv("MIBYAN_TEST_KEY", "sk-new-key-000000002")

    server.push(Fault("status", status=401), FakeReply("authorised now"))
    client = client_for(server, "chat_completions", refresh_credentials=refresh)
    client.register("main", fake_model(server, "main-model", key_env="MIBYAN_TEST_KEY"))
    agent = agent_for(client, Recorder())
    assert await agent.achat("hi") == "authorised now"
    assert refreshed == ["main-model"]
    keys = [r.headers.get("authorization") for r in server.requests]
    assert keys == ["Bearer sk-old-key-000000001", "Bearer sk-new-key-000000002"]


async def test_auth_failure_with_no_new_key_fails_over(
    server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIBYAN_TEST_KEY", "sk-same-key-00000001")
    server.push(Fault("status", status=401), FakeReply("backup ok"))
    recorder = Recorder()
    client = client_for(server, "chat_completions", fallback=("backup",))
    client.register("main", fake_model(server, "main-model", key_env="MIBYAN_TEST_KEY"))
    agent = agent_for(client, recorder)
    assert await agent.achat("hi") == "backup ok"
    assert [f.reason for f in recorder.of(FallbackNotice)] == ["auth"]


async def test_slow_first_byte_is_waited_for(server: FakeProviderServer) -> None:
    server.push(Fault("slow_first_byte", seconds=0.3, reply=FakeReply("patience")))
    agent = agent_for(client_for(server, "chat_completions"), Recorder())
    start = time.perf_counter()
    assert await agent.achat("hi") == "patience"
    assert time.perf_counter() - start >= 0.3


@pytest.mark.parametrize(
    "fault",
    [Fault("stall", seconds=2.0), Fault("slow_first_byte", seconds=2.0)],
    ids=["stall", "slow"],
)
async def test_a_stalled_stream_times_out_and_is_retried(
    server: FakeProviderServer, fault: Fault
) -> None:
    server.push(fault, FakeReply("second try"))
    recorder = Recorder()
    timeout = httpx.Timeout(connect=2.0, read=0.3, write=2.0, pool=2.0)
    agent = agent_for(client_for(server, "chat_completions", timeout=timeout), recorder)
    assert await agent.achat("hi") == "second try"
    assert [n.error_kind for n in recorder.of(RetryNotice)] == ["timeout"]


@pytest.mark.parametrize("mode", MODES)
async def test_abort_mid_stream_closes_promptly_with_the_partial(
    server: FakeProviderServer, mode: str
) -> None:
    long_text = "word " * 400
    server.push(
        Fault("stall", seconds=30.0, after_events=6, reply=FakeReply(long_text, chunk_size=5))
    )
    recorder = Recorder()
    agent = agent_for(client_for(server, mode), recorder)

    def abort_after_text(event: object) -> None:
        message = getattr(event, "message", None)
        if (
            getattr(event, "type", "") == "message_update"
            and isinstance(message, AssistantMessage)
            and message.content
        ):
            agent.abort("stop please")

    agent.subscribe(abort_after_text)
    start = time.perf_counter()
    await agent.achat("talk")
    assert time.perf_counter() - start < 2.0  # not the server's 30 s stall
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.content
    assert long_text.startswith(final.content)
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "aborted"
    check_grammar(recorder.events)


async def test_abort_while_waiting_to_retry_ends_at_once(server: FakeProviderServer) -> None:
    server.push(Fault("status", status=429, retry_after=30))
    client = tracked(ProviderClient(retry=RetryPolicy()))  # the real, interruptible sleep
    client.register("main", fake_model(server, "m"))
    agent = Agent(stream_fn=client, model="main")
    agent.subscribe(lambda e: agent.abort() if isinstance(e, RetryNotice) else None)
    start = time.perf_counter()
    await agent.achat("hi")
    assert time.perf_counter() - start < 2.0
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"


@pytest.mark.parametrize(
    ("mode", "header", "value"),
    [
        ("chat_completions", "authorization", f"Bearer {SECRET}"),
        ("codex_responses", "authorization", f"Bearer {SECRET}"),
        ("anthropic_messages", "x-api-key", SECRET),
    ],
)
async def test_key_goes_in_the_right_header_and_nowhere_else(
    server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch, mode: str, header: str, value: str
) -> None:
    monkeypatch.setenv("MIBYAN_TEST_KEY", SECRET)
    server.push(Fault("status", status=401, message=f"Incorrect API key provided: {SECRET}"))
    recorder = Recorder()
    client = client_for(server, mode)
    client.register(
        "main",
        fake_model(server, "main-model", api_mode=mode, key_env="MIBYAN_TEST_KEY"),
    )
    agent = agent_for(client, recorder)
    await agent.achat("hi")
    assert server.requests[0].headers[header] == value
    everything = "".join(e.model_dump_json() for e in recorder.events)
    assert SECRET not in everything
    assert "[redacted]" in everything
    assert SECRET not in json.dumps([r.body for r in server.requests])


async def test_no_key_configured_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent(stream_fn=ProviderClient(), model="openai:gpt-4.1-mini")
    await agent.achat("hi")
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.error_message is not None
    assert "OPENAI_API_KEY" in final.error_message


async def test_bad_model_name_is_an_error_message_not_a_crash() -> None:
    agent = Agent(stream_fn=ProviderClient(), model="openia:gpt-4")
    await agent.achat("hi")
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.error_message is not None
    assert "Did you mean 'openai'" in final.error_message


async def test_cost_uses_the_price_table(server: FakeProviderServer) -> None:
    server.push(FakeReply("priced", usage=FakeUsage(input=1_000_000, output=1_000_000)))
    client = tracked(ProviderClient(retry=RetryPolicy(sleep=Sleeps())))
    client.register(
        "main",
        resolve_model(f"openai:gpt-4.1-mini@{server.base_url}", api_key="sk-priced-key-0000001"),
    )
    agent = Agent(stream_fn=client, model="main")
    await agent.achat("hi")
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.usage.cost == pytest.approx(0.40 + 1.60)
    server.push(FakeReply("unknown", usage=FakeUsage(input=10, output=10)))
    client.register(
        "main",
        resolve_model(f"openai:brand-new-model@{server.base_url}", api_key="sk-priced-key-0000001"),
    )
    await agent.achat("again")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.usage.cost is None


async def test_one_client_serves_several_event_loops(server: FakeProviderServer) -> None:
    """``chat()`` from sync code runs each call on a fresh loop (in a worker thread here)."""
    server.push(FakeReply("one"), FakeReply("two"))
    client = client_for(server, "chat_completions")
    agent = Agent(stream_fn=client, model="main")
    assert await asyncio.to_thread(agent.chat, "first") == "one"
    assert await asyncio.to_thread(agent.chat, "second") == "two"


async def test_an_adapter_bug_ends_the_stream_with_a_redacted_error(
    server: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibyan_jupyter.providers import openai_chat

    def broken(self: object, model: str) -> object:
        raise KeyError(f"boom {SECRET}")

    monkeypatch.setattr(openai_chat.ChatCompletionsAdapter, "new_parser", broken)
    monkeypatch.setenv("MIBYAN_TEST_KEY", SECRET)
    server.push(FakeReply("never parsed"))
    client = client_for(server, "chat_completions")
    client.register("main", fake_model(server, "main-model", key_env="MIBYAN_TEST_KEY"))
    agent = agent_for(client, Recorder())
    await agent.achat("hi")
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "error"
    assert final.error_message is not None
    assert "internal error while reading the reply" in final.error_message
    assert SECRET not in final.error_message
