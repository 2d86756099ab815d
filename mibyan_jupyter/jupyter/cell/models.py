"""Which model a cell talks to, and the stream function that reaches it.

The order: the cell's ``--model``; else, for a session that already exists (resumed in a new
kernel, named by ``--session``, or this notebook's current one), the session's own model,
so a session continues as it was; else the configured default; else the first provider
whose key is set; else the demo model.

With no model configured and no provider key in the environment, the built-in demo model
answers (the teaching notebooks and Binder rely on it), and the view says so. A hosted model
whose key is missing fails before the run with what to set, never mid-stream.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.cell.options import AgentUsageError, CellOptions

if TYPE_CHECKING:
    from mibyan_jupyter.core.stream import StreamFn
    from mibyan_jupyter.providers.spec import ModelSpec

DEMO_MODELS = {"demo": 0.02, "demo-slow": 0.2}
"""Demo model names and their delay between chunks (``demo-slow`` shows Stop in class)."""

DEMO_DELAY_ENV = "MIBYAN_DEMO_DELAY"
"""Seconds between the demo's chunks for every demo model (tests run notebooks faster)."""

AUTO_MODELS = (
    ("OPENAI_API_KEY", "openai:gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("OPENROUTER_API_KEY", "openrouter:openai/gpt-4.1-mini"),
)
"""The model used when none is configured: the first provider whose key is set."""

CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("demo", 8_192),
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("claude", 200_000),
    ("gemini-2", 1_048_576),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("llama3", 8_192),
    ("qwen2.5", 32_768),
    ("qwen3", 40_960),
    ("mistral", 32_768),
    ("deepseek", 65_536),
)
"""Context windows of known models by model-name prefix (the part after ``provider:`` and
any ``vendor/`` of a router), longest-known first: the view's context bar and the
compaction thresholds use them. Unknown models (local servers) have none unless
``--context-window`` or ``c.AgentMagics.context_window`` gives it; then the conversation is
compacted only when the provider says it overflowed."""


@dataclass(frozen=True, slots=True)
class ChosenModel:
    """The model of one cell, resolved once: the header, the store record and the agent
    all take the model from this object, and the provider client is given ``spec``."""

    name: str
    """What the Agent sends as ``request.model`` (a spec string or a demo name)."""
    label: str
    """For the header and the store: the spec without anything secret."""
    demo: bool
    context_window: int | None
    spec: ModelSpec | None = None
    """The resolved spec (``None`` for the demo models)."""


def choose_model(requested: str, *, whose: str = "") -> ChosenModel:
    """The model for ``requested`` ("" = automatic); raises :class:`AgentUsageError` for an
    unknown name or a missing key, saying what to do. ``whose`` names where the model
    came from when that is not the cell (e.g. "this session's model"), for the message."""
    name = requested.strip() or _automatic()
    if name in DEMO_MODELS:
        return ChosenModel(name, name, True, context_window_of(name))
    from mibyan_jupyter.providers.spec import ModelSpecError, resolve_model

    other = "choose another with --model" if whose else "use --model demo"
    try:
        spec = resolve_model(name)
    except ModelSpecError as error:
        where = f"{whose}: " if whose else ""
        raise AgentUsageError(
            f"{where}{error} (or --model demo for the built-in demo model)"
        ) from None
    missing = _missing_key(spec)
    if missing:
        subject = f"{whose} {spec.label}" if whose else spec.label
        raise AgentUsageError(
            f"{subject} needs an API key: set {missing} in the kernel's environment "
            f"(e.g. %env {missing}=...) or {other}"
        )
    return ChosenModel(name, spec.label, False, context_window_of(spec.label), spec)


def choose_cell_model(options: CellOptions, session_model: str | None) -> ChosenModel:
    """The model of a cell, resolved once: the cell's ``--model``, else the model of the
    session it continues, else the configured default, else the first provider whose key
    is set, else the demo model (docs/architecture.md, "One `%%agent` cell, end to end")."""
    if "model" in options.explicit or not session_model:
        return choose_model(options.model)
    return choose_model(session_model, whose="this session's model")


def _automatic() -> str:
    for env, model in AUTO_MODELS:
        if os.environ.get(env):
            return model
    return "demo"


def context_window_of(label: str) -> int | None:
    """The bundled table's window for a model label (``openai:gpt-4.1-mini``,
    ``openrouter:anthropic/claude-sonnet-4-5``, ``ollama:llama3.1:8b``); ``None``: unknown."""
    name = label.split(":", 1)[1] if ":" in label else label
    name = name.rsplit("/", 1)[-1].lower()
    for prefix, tokens in CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return tokens
    return None


def choose_fallbacks(names: tuple[str, ...]) -> list[ChosenModel]:
    """Each ``--fallback`` model checked as ``--model`` is (known provider, key set), so a
    typo fails the cell at once naming the known providers, not when the primary model
    fails and the run has nothing to fall back to."""
    from mibyan_jupyter.providers.spec import ModelSpecError, resolve_model

    chosen: list[ChosenModel] = []
    for name in names:
        if name.strip() in DEMO_MODELS:
            chosen.append(choose_model(name))
            continue
        try:
            spec = resolve_model(name)
        except ModelSpecError as error:
            raise AgentUsageError(f"--fallback {name!r}: {error}") from None
        missing = _missing_key(spec)
        if missing:
            raise AgentUsageError(
                f"--fallback {name!r} needs an API key: set {missing} in the kernel's "
                "environment, or leave it out"
            )
        chosen.append(ChosenModel(name, spec.label, False, context_window_of(spec.label), spec))
    return chosen


def _missing_key(spec: ModelSpec) -> str | None:
    """The variable to set when ``spec`` needs a key and none is given or set."""
    env = spec.key_env
    if spec.requires_key and spec.api_key is None and env and not os.environ.get(env):
        return env
    return None


def stream_function(chosen: ChosenModel, fallback_models: tuple[str, ...]) -> StreamFn:
    """The demo model, or a provider client with its fallback chain. The client is given
    the specs already resolved here, so it does not resolve them a second time. Every
    fallback is checked first, also behind the demo model (which never fails over)."""
    fallbacks = choose_fallbacks(fallback_models)
    if chosen.demo:
        from mibyan_jupyter.core.demo_model import demo_model

        try:
            delay = max(0.0, float(os.environ[DEMO_DELAY_ENV]))
        except (KeyError, ValueError):
            delay = DEMO_MODELS[chosen.name]
        return demo_model(delay=delay)
    from mibyan_jupyter.providers.client import ProviderClient

    client = ProviderClient(fallback_models=fallback_models)
    for model in (chosen, *fallbacks):
        if model.spec is not None:
            client.register(model.name, model.spec)
    return client


def model_rows() -> list[tuple[str, str, str]]:
    """(model, provider, status) rows for ``%agent models``."""
    from mibyan_jupyter.providers.spec import PROVIDERS

    rows = [(name, "built-in", "always available (no key)") for name in DEMO_MODELS]
    for provider in PROVIDERS.values():
        if provider.name == "fake":
            continue
        if provider.key_env is None:
            status = f"local server at {provider.base_url}"
        elif os.environ.get(provider.key_env):
            status = f"key set ({provider.key_env})"
        else:
            status = f"no key: set {provider.key_env}"
        example = next((m for env, m in AUTO_MODELS if env == provider.key_env), None)
        rows.append((example or f"{provider.name}:<model>", provider.name, status))
    return rows
