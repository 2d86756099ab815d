"""When to try a failed model call again, and how long to wait first.

Hermes' policy: rate limits and overloads (429 / 503 / 529) honour the server's
``Retry-After`` (seconds or an HTTP date) up to a cap; other retryable failures back off
exponentially with jitter; 4xx errors other than those are never retried. The clock, the
random source and the sleep are injectable, so tests check the timing without sleeping,
and the default sleep wakes up at once when the run is aborted.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.providers.errors import ProviderError

Sleep = Callable[[float, AbortSignal], Awaitable[bool]]
"""Sleep up to N seconds; returns ``True`` when woken by an abort."""


async def interruptible_sleep(seconds: float, signal: AbortSignal) -> bool:
    return await signal.sleep(seconds)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


_HONOURS_RETRY_AFTER = frozenset({"rate_limit", "overloaded"})


@dataclass
class RetryPolicy:
    """``max_retries`` retries after the first attempt (Hermes' default: 3)."""

    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0
    retry_after_cap: float = 60.0
    jitter: float = 0.25
    """Each backoff delay is multiplied by a random factor in [1 - jitter, 1 + jitter]."""
    sleep: Sleep = interruptible_sleep
    rand: Callable[[], float] = field(default=random.random)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    def should_retry(self, error: ProviderError, attempt: int) -> bool:
        """``attempt`` counts attempts made so far (1 after the first failure)."""
        return error.hints.retryable and attempt <= self.max_retries

    def delay(self, error: ProviderError, attempt: int) -> float:
        if error.retry_after is not None and (
            error.kind in _HONOURS_RETRY_AFTER or error.status in (429, 503, 529)
        ):
            return min(error.retry_after, self.retry_after_cap)
        backoff = min(self.base_delay * 2.0 ** (attempt - 1), self.max_delay)
        factor = 1 + self.jitter * (2 * self.rand() - 1)
        return max(0.0, backoff * factor)
