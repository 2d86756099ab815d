"""Model specs, API-mode resolution, retry timing, prices and keys (no network)."""

from __future__ import annotations

import json
import time
from email.utils import formatdate
from pathlib import Path

import pytest

from mibyan_jupyter.core.messages import Usage
from mibyan_jupyter.providers.credentials import REDACT, REDACTED, Redactor, read_key
from mibyan_jupyter.providers.errors import ProviderError, classify_status, classify_stream_error
from mibyan_jupyter.providers.pricing import Price, PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy, parse_retry_after
from mibyan_jupyter.providers.spec import ModelSpecError, resolve_model

# -- specs and API modes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "provider", "model", "mode", "base_url", "key_env"),
    [
        (
            "openai:gpt-4.1-mini",
            "openai",
            "gpt-4.1-mini",
            "chat_completions",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
        ),
        (
            "openai:gpt-5-codex",
            "openai",
            "gpt-5-codex",
            "codex_responses",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
        ),
        (
            "anthropic:claude-sonnet-4-5",
            "anthropic",
            "claude-sonnet-4-5",
            "anthropic_messages",
            "https://api.anthropic.com/v1",
            "ANTHROPIC_API_KEY",
        ),
        (
            "openrouter:anthropic/claude-3.5-sonnet",
            "openrouter",
            "anthropic/claude-3.5-sonnet",
            "chat_completions",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
        ),
        (
            "ollama:llama3.1:8b",
            "ollama",
            "llama3.1:8b",
            "chat_completions",
            "http://localhost:11434/v1",
            None,
        ),
        (
            "qwen2.5@http://localhost:8000/v1/",
            None,
            "qwen2.5",
            "chat_completions",
            "http://localhost:8000/v1",
            None,
        ),
        (
            "gpt-4.1",
            "openai",
            "gpt-4.1",
            "chat_completions",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
        ),
        (
            "claude-3-5-haiku",
            "anthropic",
            "claude-3-5-haiku",
            "anthropic_messages",
            "https://api.anthropic.com/v1",
            "ANTHROPIC_API_KEY",
        ),
        (
            "fake:demo@http://127.0.0.1:9/v1",
            "fake",
            "demo",
            "chat_completions",
            "http://127.0.0.1:9/v1",
            None,
        ),
    ],
)
def test_spec_syntax(
    spec: str, provider: str | None, model: str, mode: str, base_url: str, key_env: str | None
) -> None:
    resolved = resolve_model(spec)
    assert (
        resolved.provider,
        resolved.model_id,
        resolved.api_mode,
        resolved.base_url,
        resolved.key_env,
    ) == (
        provider,
        model,
        mode,
        base_url,
        key_env,
    )


def test_api_mode_resolution_order() -> None:
    # 1. explicit beats everything
    assert (
        resolve_model("anthropic:claude-x", api_mode="chat_completions").api_mode
        == "chat_completions"
    )
    # 2. the provider beats the base URL
    assert (
        resolve_model("openai:gpt-4.1@https://api.anthropic.com/v1").api_mode == "chat_completions"
    )
    # 3. the base URL when there is no provider
    assert resolve_model("m@https://api.anthropic.com/v1").api_mode == "anthropic_messages"
    assert resolve_model("m@https://chatgpt.com/backend-api/codex").api_mode == "codex_responses"
    # 4. else chat completions
    assert resolve_model("m@http://127.0.0.1:1234/v1").api_mode == "chat_completions"


def test_hosted_base_url_brings_its_key_and_caching() -> None:
    spec = resolve_model("some-model@https://api.anthropic.com/v1")
    assert spec.key_env == "ANTHROPIC_API_KEY"
    assert spec.prompt_caching
    assert spec.requires_key
    assert not resolve_model("anthropic:claude-x@http://127.0.0.1:9/v1").prompt_caching


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("openia:gpt-4", "Did you mean 'openai'"),
        ("llama3", "provider:model"),
        ("", "empty model name"),
        ("fake:x", "needs a base URL"),
        ("openai:", "no model name"),
    ],
)
def test_bad_specs_say_how_to_fix_them(spec: str, needle: str) -> None:
    with pytest.raises(ModelSpecError, match=needle):
        resolve_model(spec)


def test_unknown_api_mode_is_refused() -> None:
    with pytest.raises(
        ModelSpecError, match="chat_completions, codex_responses, anthropic_messages"
    ):
        resolve_model("openai:gpt-4.1", api_mode="completions")


def test_spec_repr_never_shows_the_key() -> None:
    spec = resolve_model("openai:gpt-4.1", api_key="sk-secret-value-123456")
    assert "sk-secret" not in repr(spec)


# -- retry timing ------------------------------------------------------------------------


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("0.5") == 0.5
    now = time.time()
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(retry_after_cap=20)
    assert policy.delay(ProviderError("rate_limit", "x", status=429, retry_after=5), 1) == 5
    assert policy.delay(ProviderError("overloaded", "x", status=529, retry_after=500), 1) == 20


def test_backoff_is_exponential_with_jitter() -> None:
    low = RetryPolicy(base_delay=1, jitter=0.25, rand=lambda: 0.0)
    high = RetryPolicy(base_delay=1, jitter=0.25, rand=lambda: 1.0)
    error = ProviderError("server_error", "boom", status=500)
    assert [low.delay(error, n) for n in (1, 2, 3)] == [0.75, 1.5, 3.0]
    assert [high.delay(error, n) for n in (1, 2, 3)] == [1.25, 2.5, 5.0]
    assert RetryPolicy(base_delay=1, max_delay=4, jitter=0).delay(error, 10) == 4


def test_which_errors_are_retried() -> None:
    policy = RetryPolicy(max_retries=2)
    assert policy.should_retry(ProviderError("rate_limit", "x"), 1)
    assert policy.should_retry(ProviderError("server_error", "x"), 2)
    assert not policy.should_retry(ProviderError("server_error", "x"), 3)
    for kind in ("bad_request", "auth", "context_overflow", "model_not_found", "billing"):
        assert not policy.should_retry(ProviderError(kind, "x"), 1), kind  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "Invalid API key", "auth"),
        (403, "forbidden", "auth"),
        (402, "payment required", "billing"),
        (429, "insufficient_quota: You exceeded your current quota, check billing", "billing"),
        (429, "Rate limit reached", "rate_limit"),
        (529, "Overloaded", "overloaded"),
        (503, "unavailable", "overloaded"),
        (500, "internal", "server_error"),
        (413, "too large", "payload_too_large"),
        (400, "This model's maximum context length is 128000 tokens", "context_overflow"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
        (404, "The model `gpt-9` does not exist", "model_not_found"),
        (400, "Invalid parameter: temperature", "bad_request"),
        (504, "gateway timeout", "timeout"),
    ],
)
def test_status_classification(status: int, message: str, kind: str) -> None:
    assert classify_status(status, message) == kind


def test_stream_error_classification() -> None:
    assert classify_stream_error("Overloaded", "overloaded_error") == "overloaded"
    assert classify_stream_error("Rate limit exceeded") == "rate_limit"
    assert classify_stream_error("something broke") == "server_error"


# -- prices --------------------------------------------------------------------------------


def test_cost_by_longest_prefix_and_unknown_is_none() -> None:
    table = PriceTable()
    usage = Usage(input=1_000_000, output=1_000_000, cache_read=1_000_000, cache_write=1_000_000)
    assert table.cost("anthropic", "claude-sonnet-4-5-20250929", usage) == pytest.approx(
        3 + 15 + 0.3 + 3.75
    )
    assert table.cost("openai", "gpt-4.1-mini", Usage(input=1_000_000)) == pytest.approx(0.40)
    assert table.cost("openai", "gpt-4.1", Usage(input=1_000_000)) == pytest.approx(2.00)
    assert table.cost("openai", "some-new-model", usage) is None
    assert table.cost(None, "mystery", usage) is None
    assert table.cost("ollama", "llama3.1", usage) == 0.0


def test_prices_can_be_overridden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = PriceTable()
    table.set("mystery", Price(1.0, 2.0))
    assert table.cost(
        None, "mystery-7b", Usage(input=1_000_000, output=1_000_000)
    ) == pytest.approx(3.0)
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai:gpt-4.1": {"input": 9, "output": 9}}))
    monkeypatch.setenv("MIBYAN_PRICES", str(path))
    assert PriceTable().cost("openai", "gpt-4.1", Usage(input=1_000_000)) == pytest.approx(9)
    path.write_text("{broken")
    with pytest.raises(ValueError, match="cannot read prices"):
        PriceTable()


# -- keys ----------------------------------------------------------------------------------


async def test_key_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model("openai:gpt-4.1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-key-000001")
    assert await read_key(spec) == "sk-first-key-000001"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-second-key-00002")
    assert await read_key(spec) == "sk-second-key-00002"


async def test_key_from_a_callable_sync_or_async() -> None:
    async def fetch() -> str:
        return "sk-from-async-helper-1"

    assert (
        await read_key(resolve_model("openai:gpt-4.1", api_key=lambda: "sk-from-sync-helper-1"))
        == "sk-from-sync-helper-1"
    )
    assert (
        await read_key(resolve_model("openai:gpt-4.1", api_key=fetch)) == "sk-from-async-helper-1"
    )


async def test_missing_key_names_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(
        ProviderError, match="set the ANTHROPIC_API_KEY environment variable"
    ) as info:
        await read_key(resolve_model("anthropic:claude-sonnet-4-5"))
    assert info.value.kind == "auth"
    assert await read_key(resolve_model("ollama:llama3.1")) is None  # local servers need none


def test_redaction_of_environment_and_seen_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-environment-secret")
    assert REDACT("bad key sk-or-environment-secret!") == f"bad key {REDACTED}!"
    redactor = Redactor()
    redactor.add("literal-secret-123")
    redactor.add("x")  # too short to redact safely
    assert redactor("a literal-secret-123 and x") == f"a {REDACTED} and x"
