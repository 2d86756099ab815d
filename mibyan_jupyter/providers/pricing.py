"""What a model call cost, from a bundled price table users can extend or override.

Why bundled instead of genai-prices: that package pulls in a second HTTP stack (httpx2)
and fetches updates at run time; a kernel should not. Prices are USD per million tokens,
matched by the longest model-id prefix, so dated variants (``claude-sonnet-4-5-20250929``)
find their family. An unknown model costs ``None`` — never 0, which would make a cost budget
silently useless — while local servers (Ollama, vLLM...) cost a known 0. Override or add with
:meth:`PriceTable.set` or a JSON file named by ``MIBYAN_PRICES`` (``{"model-prefix": {"input":
..., "output": ..., "cache_read": ..., "cache_write": ...}}``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mibyan_jupyter.core.budget_gate import ModelPrice, PriceFn
from mibyan_jupyter.core.messages import Usage


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_read * read
            + usage.cache_write * write
        )
        return total / 1_000_000


# Public list prices (USD / 1M tokens), checked 2025; extend with PriceTable.set().
_BUNDLED: dict[str, Price] = {
    "openai:gpt-5-nano": Price(0.05, 0.40, 0.005),
    "openai:gpt-5-mini": Price(0.25, 2.00, 0.025),
    "openai:gpt-5": Price(1.25, 10.00, 0.125),
    "openai:gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "openai:gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "openai:gpt-4.1": Price(2.00, 8.00, 0.50),
    "openai:gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "openai:gpt-4o": Price(2.50, 10.00, 1.25),
    "openai:o4-mini": Price(1.10, 4.40, 0.275),
    "openai:o3-mini": Price(1.10, 4.40, 0.55),
    "openai:o3": Price(2.00, 8.00, 0.50),
    "anthropic:claude-opus-4": Price(15.00, 75.00, 1.50, 18.75),
    "anthropic:claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "anthropic:claude-haiku-4": Price(1.00, 5.00, 0.10, 1.25),
    "anthropic:claude-3-7-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "anthropic:claude-3-5-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "anthropic:claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
}
_FREE_PROVIDERS = frozenset({"ollama", "vllm", "llamacpp", "lmstudio", "fake"})


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self._prices = dict(_BUNDLED if prices is None else prices)
        path = os.environ.get("MIBYAN_PRICES")
        if prices is None and path:
            self.load(Path(path))

    def set(self, key: str, price: Price) -> None:
        """``key`` is ``provider:model-prefix`` or a bare ``model-prefix``."""
        self._prices[key] = price

    def load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            for key, fields in data.items():
                self.set(key, Price(**fields))
        except (OSError, ValueError, TypeError) as error:
            raise ValueError(f"cannot read prices from {path}: {error}") from None

    def price(self, provider: str | None, model_id: str) -> Price | None:
        candidates = [model_id] if provider is None else [f"{provider}:{model_id}", model_id]
        for name in candidates:
            best = max((k for k in self._prices if name.startswith(k)), key=len, default=None)
            if best is not None:
                return self._prices[best]
        return None

    def cost(self, provider: str | None, model_id: str, usage: Usage) -> float | None:
        if provider in _FREE_PROVIDERS:
            return 0.0
        price = self.price(provider, model_id)
        return None if price is None else price.cost(usage)

    def model_price(self, provider: str | None, model_id: str) -> ModelPrice | None:
        """The budget gate's view of a price (core/budget_gate.py): USD per million
        tokens, the input at the dearest rate an input token is billed (a cache write
        costs more than plain input); ``None`` when unknown; a local server costs 0."""
        if provider in _FREE_PROVIDERS:
            return ModelPrice(0.0, 0.0)
        price = self.price(provider, model_id)
        if price is None:
            return None
        dearest_input = max(price.input, price.cache_write or 0.0, price.cache_read or 0.0)
        return ModelPrice(dearest_input, price.output)


def chain_prices(
    models: Sequence[tuple[str | None, str]], table: PriceTable | None = None
) -> PriceFn:
    """The gate's price function for a model and its fallbacks (``(provider, model_id)``
    each): the dearest rates of the chain, since a failover may move any call to any of
    them; unknown when one of them is."""
    prices = table if table is not None else PriceTable()
    found = [prices.model_price(provider, model_id) for provider, model_id in models]
    known = [p for p in found if p is not None]
    dearest = (
        ModelPrice(max(p.input for p in known), max(p.output for p in known))
        if known and len(known) == len(found)
        else None
    )

    def price_of(_model: str) -> ModelPrice | None:
        return dearest

    return price_of
