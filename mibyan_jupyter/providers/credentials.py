"""API keys: read at call time, refreshed on demand, and never shown.

Keys come from ``ModelSpec.api_key`` (a literal or a callable, sync or async) or else from
the provider's environment variable, read when the request is made, so a key rotated in
the environment (or by a credential helper) is picked up without restarting the kernel.
Every key read is registered with the shared :data:`mibyan_jupyter.secrets.REDACT`, which
removes it (and every secret-named environment variable's value) from any text a user may
see or the store may save.
"""

from __future__ import annotations

import inspect
import os

from mibyan_jupyter.providers.errors import ProviderError
from mibyan_jupyter.providers.spec import ModelSpec
from mibyan_jupyter.secrets import REDACT, REDACTED, Redactor

__all__ = ["REDACT", "REDACTED", "Redactor", "read_key"]


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
