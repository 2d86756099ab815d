"""API keys: read at call time, refreshed on demand, and never shown.

Keys come from ``ModelSpec.api_key`` (a literal or a callable, sync or async) or else from
the provider's environment variable, read when the request is made, so a key rotated in
the environment (or by a credential helper) is picked up without restarting the kernel.
:class:`Redactor` removes every key it has seen, and every key in the known environment
variables, from any text a user may see: error messages, notices, tracebacks.
"""

from __future__ import annotations

import inspect
import os
import re
import threading

from mibyan_jupyter.providers.errors import ProviderError
from mibyan_jupyter.providers.spec import PROVIDERS, ModelSpec

REDACTED = "[redacted]"
_MIN_SECRET = 8  # shorter values (e.g. "x") would redact ordinary words


class Redactor:
    """Replaces known secrets in text. Thread-safe; keys are only ever added."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= _MIN_SECRET and secret not in self._secrets:
            with self._lock:
                self._secrets.add(secret)
                self._pattern = None

    def _known(self) -> re.Pattern[str] | None:
        for provider in PROVIDERS.values():
            if provider.key_env:
                self.add(os.environ.get(provider.key_env))
        with self._lock:
            if self._pattern is None and self._secrets:
                ordered = sorted(self._secrets, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
            return self._pattern

    def __call__(self, text: str) -> str:
        pattern = self._known()
        return pattern.sub(REDACTED, text) if pattern else text


REDACT = Redactor()
"""The process-wide redactor every provider error goes through."""


async def read_key(spec: ModelSpec) -> str | None:
    """The key for ``spec`` as of now; raises ``ProviderError(kind="auth")`` with what to
    set when the provider needs one and none is configured."""
    key: str | None = None
    source = spec.api_key
    if callable(source):
        value = source()
        key = await value if inspect.isawaitable(value) else value
    elif isinstance(source, str):
        key = source
    if not key and spec.key_env:
        key = os.environ.get(spec.key_env) or None
    if key:
        REDACT.add(key)
        return key
    if spec.requires_key:
        where = (
            f"set the {spec.key_env} environment variable" if spec.key_env else "pass api_key=..."
        )
        raise ProviderError(
            "auth",
            f"no API key for {spec.label}: {where} (or pass api_key= / a key callable), "
            "or use the demo model",
        )
    return None
