"""The attempts of one model within a model call: what :class:`~.client.ProviderClient`
runs for each model of its fallback chain.

An attempt is one HTTP request (see :mod:`.http_call`). After it: a kept reply ends the
attempts; a reply that paused its turn (Anthropic ``pause_turn``) is continued with one
more request and no notice, since the reply goes on; a reply with no text and no tool call
is asked again, up to ``max_incomplete`` in a row; a failure is retried as the policy says
(:mod:`.retry`), after one credential refresh on 401/403. Each retry is announced with a
:class:`RetryNotice` carrying the discarded attempt's priced usage, so every attempt that
was billed is counted once (the last failed one is left in ``spent`` for the fallback
notice or the final error).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import httpx

from mibyan_jupyter.core.messages import AssistantMessage, Usage
from mibyan_jupyter.core.notices import RetryNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent
from mibyan_jupyter.providers.credentials import read_key
from mibyan_jupyter.providers.errors import ProviderError, at_endpoint
from mibyan_jupyter.providers.http_call import Attempt, stream_once
from mibyan_jupyter.providers.pricing import PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import ModelSpec

if TYPE_CHECKING:
    from mibyan_jupyter.providers.base import ApiMode, WireAdapter

RefreshHook = Callable[[ModelSpec], "Awaitable[None] | None"]


def adapter_for(mode: ApiMode) -> WireAdapter:
    """The wire adapter of an API mode (imported on first use)."""
    if mode == "chat_completions":
        from mibyan_jupyter.providers.openai_chat import ChatCompletionsAdapter

        return ChatCompletionsAdapter()
    if mode == "codex_responses":
        from mibyan_jupyter.providers.openai_responses import ResponsesAdapter

        return ResponsesAdapter()
    from mibyan_jupyter.providers.anthropic import AnthropicAdapter

    return AnthropicAdapter()


class AttemptHost(Protocol):
    """What the attempts need from the client that runs them (its settings, its pooled
    HTTP client, its call budget)."""

    retry: RetryPolicy
    prices: PriceTable
    refresh_credentials: RefreshHook | None
    max_incomplete: int
    max_calls: int | None

    def http(self) -> httpx.AsyncClient: ...

    def take_call(self, *, grace: bool) -> bool: ...


@runtime_checkable
class PausableAdapter(Protocol):
    """An adapter whose replies may pause the turn (see :mod:`.anthropic`)."""

    def continue_paused(self) -> bool: ...

    def forget_paused(self) -> None: ...


def _incomplete(message: AssistantMessage) -> bool:
    return not message.tool_calls and not (message.content and message.content.strip())


class ModelAttempts:
    """One model's attempts within a stream call: retries, credential refresh, stalls,
    continuations of a paused reply. After :meth:`run`, ``message`` is the kept reply, or
    ``error`` says why there is none (``partial`` and ``spent`` tell what it left)."""

    def __init__(
        self,
        client: AttemptHost,
        spec: ModelSpec,
        request: ModelRequest,
        signal: AbortSignal,
        *,
        grace: bool,
    ) -> None:
        self.client = client
        self.spec = spec
        self.request = request
        self.signal = signal
        self.grace = grace
        self.adapter = adapter_for(spec.api_mode)
        self.incomplete = 0
        """Replies in a row with no text and no tool call."""
        self.refreshed = False
        """The credential was refreshed once already (never twice per call)."""
        self.message: AssistantMessage | None = None
        self.partial: AssistantMessage | None = None
        self.error: ProviderError | None = None
        self.spent: Usage | None = None
        """The priced usage of the last attempt when it failed for good (reported by the
        fallback notice or the final error, never by a retry notice too)."""

    async def run(self) -> AsyncIterator[StreamEvent]:
        """Attempt until a reply is kept or an error is final; each retry is announced
        with a :class:`RetryNotice` (and waited for, when the policy says so)."""
        attempt = 0
        paused: AssistantMessage | None = None  # a reply being continued
        while True:
            if not self._take_call():
                if paused is not None:  # no call left to continue it: keep it as it is
                    self.message, self.error = self._priced(paused), None
                return
            attempt += 1
            outcome = Attempt()
            key = await self._read_key(outcome)
            if outcome.error is None:
                async for event in stream_once(
                    self.client.http(), self.spec, self.adapter, self.request, key, outcome
                ):
                    yield event
            if outcome.message is not None:
                if self._continue_paused():
                    paused = outcome.message
                    continue
                notice, wait = self._after_reply(outcome.message, attempt), False
            else:
                notice, wait = await self._after_error(outcome, key, attempt)
            if notice is None:
                return
            self._forget_paused()
            paused = None
            yield notice
            if wait and await self.client.retry.sleep(notice.delay, self.signal):
                self.error = ProviderError(
                    "aborted", self.signal.reason or "aborted while waiting to retry"
                )
                return

    def _continue_paused(self) -> bool:
        """Whether the adapter goes on with a paused reply (one more request, same reply)."""
        return isinstance(self.adapter, PausableAdapter) and self.adapter.continue_paused()

    def _forget_paused(self) -> None:
        if isinstance(self.adapter, PausableAdapter):
            self.adapter.forget_paused()

    def _take_call(self) -> bool:
        """One call of the client's budget (a grace call is exactly one call)."""
        if not self.client.take_call(grace=self.grace):
            self.error = ProviderError(
                "budget_exhausted",
                f"the call budget ({self.client.max_calls} model calls) is used up",
            )
            return False
        self.grace = False
        return True

    async def _read_key(self, outcome: Attempt) -> str | None:
        try:
            return await read_key(self.spec)
        except ProviderError as missing_key:
            outcome.error = missing_key
            return None

    def _after_reply(self, message: AssistantMessage, attempt: int) -> RetryNotice | None:
        """Keep a reply, or retry one with no text and no tool call (up to
        ``max_incomplete`` in a row, then fail with ``incomplete_response``)."""
        if not _incomplete(message):
            self.message = self._priced(message)
            return None
        self.incomplete += 1
        if self.incomplete >= self.client.max_incomplete:
            self.partial, self.spent = message, self._price(message.usage)
            self.error = ProviderError(
                "incomplete_response",
                f"{self.incomplete} replies in a row had no text and no tool call",
            )
            return None
        return RetryNotice(
            attempt=attempt,
            max_attempts=self.client.max_incomplete,
            delay=0.0,
            error_kind="incomplete_response",
            message="the reply had no text and no tool call",
            model=self.spec.model_id,
            usage=self._price(message.usage),
        )

    async def _after_error(
        self, outcome: Attempt, key: str | None, attempt: int
    ) -> tuple[RetryNotice | None, bool]:
        """What follows a failed attempt: one retry with a refreshed credential, a retry
        the policy allows (to be waited for), or the end with the error."""
        error = outcome.error
        assert error is not None
        self.partial = outcome.partial
        used = self._spent(outcome.partial)
        if error.hints.refresh_credential and not self.refreshed and await self._refresh(key):
            self.refreshed = True
            notice = RetryNotice(
                attempt=attempt,
                max_attempts=attempt + 1,
                delay=0.0,
                error_kind=error.kind,
                message="retrying with a refreshed credential",
                model=self.spec.model_id,
                usage=used,
            )
            return notice, False
        policy = self.client.retry
        if not policy.should_retry(error, attempt):
            url = self.spec.base_url + self.adapter.path
            self.error, self.spent = at_endpoint(error, url), used
            return None, False
        notice = RetryNotice(
            attempt=attempt,
            max_attempts=policy.max_retries + 1,
            delay=policy.delay(error, attempt),
            error_kind=error.kind,
            message=error.message,
            model=self.spec.model_id,
            usage=used,
        )
        return notice, True

    async def _refresh(self, used_key: str | None) -> bool:
        """Run the refresh hook (if any) and say whether the key is now a different one."""
        hook = self.client.refresh_credentials
        if hook is not None:
            result = hook(self.spec)
            if inspect.isawaitable(result):
                await result
        try:
            fresh = await read_key(self.spec)
        except ProviderError:
            return False
        return fresh is not None and fresh != used_key

    def _spent(self, partial: AssistantMessage | None) -> Usage | None:
        """The priced usage of a failed attempt; ``None`` when it reported none."""
        if partial is None or partial.usage == Usage():
            return None
        return self._price(partial.usage)

    def _price(self, usage: Usage) -> Usage:
        """``usage`` with its cost (``None``: unknown price) and total filled in."""
        spec = self.spec
        cost = self.client.prices.cost(spec.provider, spec.model_id, usage)
        total = usage.total or (usage.input + usage.output + usage.cache_read + usage.cache_write)
        return usage.model_copy(update={"cost": cost, "total": total})

    def _priced(self, message: AssistantMessage) -> AssistantMessage:
        """The kept reply, priced, naming the model that produced it (after a failover,
        the fallback model, not the one the request named)."""
        return message.model_copy(
            update={
                "usage": self._price(message.usage),
                "model": self.spec.model_id,
                "api": self.spec.api_mode,
            }
        )
