"""``ProviderClient``: the stream function that talks to real model servers.

One call goes: resolve the model spec -> read the key -> an HTTP attempt (see
:mod:`.http_call`; the attempts of one model are :mod:`.attempts`) -> on failure, retry (``Retry-After`` or backoff, see :mod:`.retry`),
refresh the credential once on 401/403, then fail over along ``fallback_models``. Each retry
and failover is announced in the stream (:class:`RetryNotice`, :class:`FallbackNotice`) so the
UI can show it; the reply then starts over. Replies with no text and no tool call (only
reasoning, or nothing) are retried; after ``max_incomplete`` in a row the call fails over
with reason ``incomplete_response``, and if that used up the call budget the fallback model
still gets exactly one grace call (Hermes). The stream never raises: failures end it with
:class:`StreamError` whose message is redacted.

Every attempt's usage is reported exactly once, priced: a kept reply's in its message, a
retried attempt's in its :class:`RetryNotice`, the last failed attempt on a model in the
:class:`FallbackNotice` that leaves it (or in the final :class:`StreamError`), so the budget
and the ledger count what was billed, not only what was kept. A reply that pauses its turn
(Anthropic ``pause_turn``) is continued by the adapter with a follow-up request, without
a notice: the reply does not start over, it goes on.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence

import httpx

from mibyan_jupyter.core.messages import AssistantMessage, Usage
from mibyan_jupyter.core.notices import FallbackNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamDone, StreamError, StreamEvent
from mibyan_jupyter.providers.attempts import (
    ModelAttempts,
    PausableAdapter,
    RefreshHook,
    adapter_for,
)
from mibyan_jupyter.providers.credentials import REDACT
from mibyan_jupyter.providers.errors import ProviderError
from mibyan_jupyter.providers.pricing import PriceTable
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.spec import ModelSpec, ModelSpecError, resolve_model

__all__ = ["PausableAdapter", "ProviderClient", "RefreshHook", "adapter_for"]


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

    def http(self) -> httpx.AsyncClient:
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
        spent: Usage | None = None  # the last failed attempt's usage, not reported yet
        grace = False
        for position, name in enumerate(chain):
            if failure is not None:
                yield FallbackNotice(
                    from_model=chain[position - 1], to_model=name, reason=failure.kind, usage=spent
                )
            try:
                spec = self.spec_for(name)
            except ModelSpecError as error:
                failure, partial = ProviderError("model_not_found", str(error)), None
                spent = None
                continue
            call = ModelAttempts(self, spec, request, signal, grace=grace)
            async for event in call.run():
                yield event
            if call.message is not None:
                done = call.message.stop_reason == "error"  # e.g. a content filter
                yield (
                    StreamError(message=call.message) if done else StreamDone(message=call.message)
                )
                return
            failure, partial, spent = call.error, call.partial, call.spent
            assert failure is not None
            if not failure.hints.fall_back:
                break
            grace = failure.kind == "incomplete_response"
        assert failure is not None
        stop = "aborted" if failure.kind == "aborted" else "error"
        base = partial or AssistantMessage(model=name)
        yield StreamError(
            message=base.model_copy(
                update={
                    "stop_reason": stop,
                    "error_message": str(failure),
                    "error_kind": failure.kind,
                    "usage": spent or Usage(),
                }
            )
        )

    def take_call(self, *, grace: bool) -> bool:
        """Count one HTTP attempt against ``max_calls``; False when it is used up (a grace
        call is allowed once past it)."""
        if self.max_calls is not None and self.calls >= self.max_calls and not grace:
            return False
        self.calls += 1
        return True
