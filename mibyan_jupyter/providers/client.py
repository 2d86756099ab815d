"""``ProviderClient``: the stream function that talks to real model servers.

One call goes: resolve the model spec -> read the key -> an HTTP attempt (see
:mod:`.http_call`) -> on failure, retry (``Retry-After`` or backoff, see :mod:`.retry`),
refresh the credential once on 401/403, then fail over along ``fallback_models``. Each retry
and failover is announced in the stream (:class:`RetryNotice`, :class:`FallbackNotice`) so the
UI can show it; the reply then starts over. Replies with no text and no tool call (only
reasoning, or nothing) are retried; after ``max_incomplete`` in a row the call fails over
with reason ``incomplete_response``, and if that used up the call budget the fallback model
still gets exactly one grace call (Hermes). The stream never raises: failures end it with
:class:`StreamError` whose message is redacted.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import httpx

from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.notices import FallbackNotice, RetryNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, StreamError, StreamEvent
from mibyan_jupyter.providers.credentials import REDACT, read_key
from mibyan_jupyter.providers.errors import ProviderError
from mibyan_jupyter.providers.http_call import Attempt, stream_once
from mibyan_jupyter.providers.pricing import PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import ModelSpec, ModelSpecError, resolve_model

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


def _incomplete(message: AssistantMessage) -> bool:
    return not message.tool_calls and not (message.content and message.content.strip())


class ProviderClient:
    """A :data:`~mibyan_jupyter.core.stream.StreamFn` for hosted and local models.

    ``request.model`` is a model spec string (see :mod:`.spec`) or a name given to
    :meth:`register`. ``max_calls`` caps the HTTP attempts made through this client
    (retries included), like Hermes' iteration budget; ``None`` means no cap.
    """

    def __init__(
        self,
        *,
        fallback_models: Sequence[str] = (),
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        refresh_credentials: RefreshHook | None = None,
        max_incomplete: int = 3,
        max_calls: int | None = None,
        timeout: httpx.Timeout | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.fallback_models = list(fallback_models)
        self.retry = retry or RetryPolicy()
        self.prices = prices or PriceTable()
        self.refresh_credentials = refresh_credentials
        self.max_incomplete = max_incomplete
        self.max_calls = max_calls
        self.calls = 0
        self._timeout = timeout or httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=10.0)
        self._transport = transport
        self._specs: dict[str, ModelSpec] = {}
        self._http: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def register(self, name: str, spec: ModelSpec) -> None:
        """Use ``spec`` whenever a request names ``name``."""
        self._specs[name] = spec

    def spec_for(self, name: str) -> ModelSpec:
        spec = self._specs.get(name)
        if spec is None:
            spec = self._specs[name] = resolve_model(name)
        return spec

    def _client(self) -> httpx.AsyncClient:
        """One pooled client per event loop (``chat()`` may run each call on a new loop)."""
        loop = asyncio.get_running_loop()
        client = self._http.get(loop)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(timeout=self._timeout, transport=self._transport)
            self._http[loop] = client
        return client

    async def aclose(self) -> None:
        client = self._http.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def __call__(self, request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        return self._guarded(request, signal)

    async def _guarded(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """The stream-function contract: never raise; a bug in an adapter still ends the
        stream with a (redacted) error instead of an exception carrying who knows what."""
        try:
            async for event in self._stream(request, signal):
                yield event
        except Exception as error:
            text = REDACT(f"{type(error).__name__}: {error}")
            message = AssistantMessage(
                model=request.model,
                stop_reason="error",
                error_kind="format_error",
                error_message=f"internal error while reading the reply: {text}",
            )
            yield StreamError(message=message)

    async def _stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        chain = [request.model, *(m for m in self.fallback_models if m != request.model)]
        failure: ProviderError | None = None
        partial: AssistantMessage | None = None
        grace = False
        for position, name in enumerate(chain):
            if failure is not None:
                yield FallbackNotice(
                    from_model=chain[position - 1], to_model=name, reason=failure.kind
                )
            try:
                spec = self.spec_for(name)
            except ModelSpecError as error:
                failure, partial = ProviderError("model_not_found", str(error)), None
                continue
            call = _Call(self, spec, request, signal, grace=grace)
            async for event in call.run():
                yield event
            if call.message is not None:
                done = call.message.stop_reason == "error"  # e.g. a content filter
                yield (
                    StreamError(message=call.message) if done else StreamDone(message=call.message)
                )
                return
            failure, partial = call.error, call.partial
            assert failure is not None
            if not failure.hints.fall_back:
                break
            grace = failure.kind == "incomplete_response"
        assert failure is not None
        stop = "aborted" if failure.kind == "aborted" else "error"
        base = partial or AssistantMessage(model=request.model)
        yield StreamError(
            message=base.model_copy(
                update={
                    "stop_reason": stop,
                    "error_message": str(failure),
                    "error_kind": failure.kind,
                }
            )
        )

    def _take_call(self, *, grace: bool) -> bool:
        if self.max_calls is not None and self.calls >= self.max_calls and not grace:
            return False
        self.calls += 1
        return True


class _Call:
    """One model's attempts within a stream call: retries, credential refresh, stalls."""

    def __init__(
        self,
        client: ProviderClient,
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

    async def run(self) -> AsyncIterator[StreamEvent]:
        """Attempt until a reply is kept or an error is final; each retry is announced
        with a :class:`RetryNotice` (and waited for, when the policy says so)."""
        attempt = 0
        while True:
            if not self._take_call():
                return
            attempt += 1
            outcome = Attempt()
            key = await self._read_key(outcome)
            if outcome.error is None:
                async for event in stream_once(
                    self.client._client(), self.spec, self.adapter, self.request, key, outcome
                ):
                    yield event
            if outcome.message is not None:
                notice, wait = self._after_reply(outcome.message, attempt), False
            else:
                notice, wait = await self._after_error(outcome, key, attempt)
            if notice is None:
                return
            yield notice
            if wait and await self.client.retry.sleep(notice.delay, self.signal):
                self.error = ProviderError(
                    "aborted", self.signal.reason or "aborted while waiting to retry"
                )
                return

    def _take_call(self) -> bool:
        """One call of the client's budget (a grace call is exactly one call)."""
        if not self.client._take_call(grace=self.grace):
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
            self.partial = message
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
        )

    async def _after_error(
        self, outcome: Attempt, key: str | None, attempt: int
    ) -> tuple[RetryNotice | None, bool]:
        """What follows a failed attempt: one retry with a refreshed credential, a retry
        the policy allows (to be waited for), or the end with the error."""
        error = outcome.error
        assert error is not None
        self.partial = outcome.partial
        if error.hints.refresh_credential and not self.refreshed and await self._refresh(key):
            self.refreshed = True
            notice = RetryNotice(
                attempt=attempt,
                max_attempts=attempt + 1,
                delay=0.0,
                error_kind=error.kind,
                message="retrying with a refreshed credential",
            )
            return notice, False
        policy = self.client.retry
        if not policy.should_retry(error, attempt):
            self.error = error
            return None, False
        notice = RetryNotice(
            attempt=attempt,
            max_attempts=policy.max_retries + 1,
            delay=policy.delay(error, attempt),
            error_kind=error.kind,
            message=error.message,
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

    def _priced(self, message: AssistantMessage) -> AssistantMessage:
        spec = self.spec
        usage = message.usage
        cost = self.client.prices.cost(spec.provider, spec.model_id, usage)
        total = usage.total or (usage.input + usage.output + usage.cache_read + usage.cache_write)
        return message.model_copy(
            update={
                "usage": usage.model_copy(update={"cost": cost, "total": total}),
                "model": spec.model_id,
                "api": spec.api_mode,
            }
        )
