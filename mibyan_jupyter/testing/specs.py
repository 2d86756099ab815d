"""Model specs that point at a running fake provider, for tests that go through
:class:`~mibyan_jupyter.providers.client.ProviderClient` over real loopback HTTP.

Why a helper: every such test wrote ``resolve_model(f"fake:NAME@{server.base_url}", ...)``;
the ``fake`` provider is local (no key needed, free in the price table), so this is the one
spelling of "this model, served by that fake server".
"""

from __future__ import annotations

from collections.abc import Mapping

from mibyan_jupyter.providers.spec import KeySource, ModelSpec, resolve_model
from mibyan_jupyter.testing.fake_server import FakeProviderServer


def fake_model(
    server: FakeProviderServer,
    model: str = "main-model",
    *,
    api_mode: str | None = None,
    api_key: KeySource | None = None,
    key_env: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ModelSpec:
    """The spec of ``model`` served by ``server`` (``api_mode`` picks the wire API the
    client speaks to it; Chat Completions by default). A key given by ``api_key`` or
    ``key_env`` is sent as a real one would be, so tests can see where it goes."""
    return resolve_model(
        f"fake:{model}@{server.base_url}",
        api_mode=api_mode,
        api_key=api_key,
        key_env=key_env,
        headers=headers,
    )
