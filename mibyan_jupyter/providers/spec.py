"""Model specs: which server, which wire API, which key — from one short string.

Syntax: ``[provider:]model[@base_url]``::

    openai:gpt-4.1-mini                      OpenAI, Chat Completions, OPENAI_API_KEY
    openai:gpt-5-codex                       OpenAI, Responses API (codex models)
    anthropic:claude-sonnet-4-5              Anthropic Messages, ANTHROPIC_API_KEY
    openrouter:anthropic/claude-3.5-sonnet   OpenRouter (OpenAI-compatible)
    ollama:llama3.1:8b                       a local Ollama server, no key
    qwen2.5-coder@http://localhost:8000/v1   any OpenAI-compatible server by base URL
    gpt-4.1-mini                             a bare name: the provider is guessed from it

The API mode is resolved as Hermes does: an explicit ``api_mode`` first, then the provider
(and its model rules), then base-URL heuristics (``api.anthropic.com`` speaks Anthropic
Messages), else ``chat_completions``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from mibyan_jupyter.providers.base import API_MODES, ApiMode

KeySource: TypeAlias = str | Callable[[], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    base_url: str | None
    api_mode: ApiMode
    key_env: str | None
    """The environment variable holding the key; ``None`` for local servers."""
    prompt_caching: bool = False
    local: bool = False


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "https://api.openai.com/v1", "chat_completions", "OPENAI_API_KEY"),
        Provider(
            "anthropic",
            "https://api.anthropic.com/v1",
            "anthropic_messages",
            "ANTHROPIC_API_KEY",
            prompt_caching=True,
        ),
        Provider(
            "openrouter", "https://openrouter.ai/api/v1", "chat_completions", "OPENROUTER_API_KEY"
        ),
        Provider("ollama", "http://localhost:11434/v1", "chat_completions", None, local=True),
        Provider("vllm", "http://localhost:8000/v1", "chat_completions", None, local=True),
        Provider("llamacpp", "http://localhost:8080/v1", "chat_completions", None, local=True),
        Provider("lmstudio", "http://localhost:1234/v1", "chat_completions", None, local=True),
        Provider("fake", None, "chat_completions", None, local=True),
    )
}


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model. ``api_key`` is a source (a literal or a callable), never logged:
    it is left out of ``repr``."""

    model_id: str
    provider: str | None
    base_url: str
    api_mode: ApiMode
    key_env: str | None = None
    api_key: KeySource | None = field(default=None, repr=False)
    prompt_caching: bool = False
    requires_key: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model_id}" if self.provider else self.model_id


class ModelSpecError(ValueError):
    """A model string that cannot be resolved; the message says how to fix it."""


_BASE_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def _guess_provider(model_id: str) -> str | None:
    lowered = model_id.lower()
    if lowered.startswith("claude"):
        return "anthropic"
    if re.match(r"^(gpt-|o\d|chatgpt|codex)", lowered):
        return "openai"
    return None


def _provider_of_url(url: str) -> Provider | None:
    """A hosted provider recognised by its base URL's host (for its key and caching)."""
    for provider in PROVIDERS.values():
        if provider.base_url and not provider.local:
            host = provider.base_url.split("/")[2]
            if host in url:
                return provider
    return None


def _mode_from_url(base_url: str) -> ApiMode | None:
    if "api.anthropic.com" in base_url:
        return "anthropic_messages"
    if "/backend-api/codex" in base_url:
        return "codex_responses"
    return None


def _mode_from_provider(provider: Provider, model_id: str) -> ApiMode:
    if provider.name == "openai" and "codex" in model_id.lower():
        return "codex_responses"
    return provider.api_mode


def resolve_model(
    spec: str,
    *,
    api_mode: str | None = None,
    base_url: str | None = None,
    api_key: KeySource | None = None,
    key_env: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ModelSpec:
    """Resolve ``spec`` (see the module docstring); keyword arguments win over the string."""
    text = spec.strip()
    if not text:
        raise ModelSpecError(
            "empty model name: use e.g. 'openai:gpt-4.1-mini' or 'anthropic:claude-sonnet-4-5'"
        )
    if api_mode is not None and api_mode not in API_MODES:
        raise ModelSpecError(f"unknown api_mode {api_mode!r}: use one of {', '.join(API_MODES)}")
    url_match = _BASE_URL.match(text)
    if url_match:
        text, base_url = url_match["model"], base_url or url_match["url"]
    provider, model_id = _split_provider(text, spec, base_url)
    prefix = text.partition(":")[0]
    if not model_id:
        raise ModelSpecError(f"no model name in {spec!r}: write e.g. '{prefix}:model-name'")
    url = base_url or (provider.base_url if provider else None)
    if provider is None and url is not None:
        provider = _provider_of_url(url)
    if url is None:
        raise ModelSpecError(
            f"the {prefix!r} provider needs a base URL: '{prefix}:model@http://127.0.0.1:PORT/v1'"
        )
    mode: ApiMode = (
        api_mode
        or (_mode_from_provider(provider, model_id) if provider else None)
        or _mode_from_url(url)
        or "chat_completions"
    )
    env = key_env or (provider.key_env if provider else None)
    return ModelSpec(
        model_id=model_id,
        provider=provider.name if provider else None,
        base_url=url.rstrip("/"),
        api_mode=mode,
        key_env=env,
        api_key=api_key,
        prompt_caching=mode == "anthropic_messages" and "api.anthropic.com" in url,
        requires_key=provider is not None and not provider.local,
        headers=dict(headers or {}),
    )


def _split_provider(text: str, spec: str, base_url: str | None) -> tuple[Provider | None, str]:
    """``provider:model`` -> (provider, model); a bare model name -> the provider guessed
    from it (``None`` when a base URL is given). An unknown prefix is one clear error."""
    prefix, colon, rest = text.partition(":")
    if colon and prefix.lower() in PROVIDERS:
        return PROVIDERS[prefix.lower()], rest
    if colon and base_url is None and "/" not in prefix:
        close = difflib.get_close_matches(prefix.lower(), PROVIDERS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ModelSpecError(
            f"unknown provider {prefix!r} in {spec!r}.{hint} Known providers: "
            f"{', '.join(PROVIDERS)}; or give a base URL: 'model@http://host:port/v1'."
        )
    if base_url is not None:
        return None, text
    guessed = _guess_provider(text)
    if guessed is None:
        raise ModelSpecError(
            f"cannot tell which server runs {spec!r}: write it as 'provider:model' "
            f"({', '.join(PROVIDERS)}) or 'model@http://host:port/v1'"
        )
    return PROVIDERS[guessed], text
