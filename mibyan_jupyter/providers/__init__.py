"""Model providers over httpx: Chat Completions, Responses and Anthropic Messages.

``ProviderClient`` is the stream function the core loop calls; model strings such as
``openai:gpt-4.1-mini`` are resolved by :func:`resolve_model` (see :mod:`.spec`).
Importing this package loads httpx, so the top-level package does not import it.
"""

from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.errors import ProviderError
from mibyan_jupyter.providers.pricing import Price, PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import PROVIDERS, ModelSpec, ModelSpecError, resolve_model

__all__ = [
    "PROVIDERS",
    "ModelSpec",
    "ModelSpecError",
    "Price",
    "PriceTable",
    "ProviderClient",
    "ProviderError",
    "RetryPolicy",
    "resolve_model",
]
