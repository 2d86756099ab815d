"""One HTTP attempt: POST the request, decode the SSE stream, normalize it.

Everything that can go wrong becomes a :class:`ProviderError` with a redacted message
(HTTP status with the server's own message, connection failures, timeouts, an error event
after HTTP 200, a stream cut off before its terminal event). Cancelling the task closes
the response, and with it the connection, at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx

from mibyan_jupyter.core.messages import AssistantMessage, Message
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent
from mibyan_jupyter.providers.base import StreamParser, WireAdapter
from mibyan_jupyter.providers.credentials import REDACT
from mibyan_jupyter.providers.errors import ProviderError, classify_status
from mibyan_jupyter.providers.retry import parse_retry_after
from mibyan_jupyter.providers.spec import ModelSpec
from mibyan_jupyter.providers.sse import SseDecoder


@dataclass
class Attempt:
    """What one attempt produced: a final message, or the partial one and an error."""

    message: AssistantMessage | None = None
    partial: AssistantMessage | None = None
    error: ProviderError | None = None


async def stream_once(
    http: httpx.AsyncClient,
    spec: ModelSpec,
    adapter: WireAdapter,
    request: ModelRequest,
    api_key: str | None,
    outcome: Attempt,
) -> AsyncIterator[StreamEvent]:
    """Yield the normalized events of one attempt; the result lands in ``outcome``."""
    body = adapter.build_body(request, spec.model_id, prompt_caching=spec.prompt_caching)
    headers = {**adapter.headers(api_key), **spec.headers}
    url = spec.base_url + adapter.path
    parser: StreamParser | None = None
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code >= 400:
                raise await _http_error(response, adapter)
            parser = adapter.new_parser(spec.model_id, taken=call_ids(request.messages))
            decoder = SseDecoder()
            async for chunk in response.aiter_bytes():
                for sse in decoder.feed(chunk):
                    for event in parser.feed(sse):
                        yield event
                if parser.done:
                    break
            else:
                for sse in decoder.close():
                    for event in parser.feed(sse):
                        yield event
            outcome.message = parser.finish()
    except ProviderError as error:
        outcome.error = _redacted(error)
    except httpx.TimeoutException as error:
        outcome.error = ProviderError(
            "timeout", REDACT(f"{type(error).__name__}: {error or 'no data in time'}")
        )
    except (httpx.TransportError, httpx.StreamError) as error:
        outcome.error = ProviderError(
            "connection", REDACT(f"{type(error).__name__}: {error or 'connection lost'}")
        )
    if outcome.error is not None and parser is not None:
        outcome.partial = parser.partial()


def call_ids(messages: Sequence[Message]) -> frozenset[str]:
    """The tool-call ids the conversation's assistant messages already use. Why: ids are
    made unique at parse time, and a server that restarts its ids per reply (Kimi's
    ``functions.name:0``, DeepSeek's and GLM's ``call_0``) must not give a later call an
    earlier one's id: the store keys its audit rows by (session, call id), and the next
    request must pair every result with one call."""
    return frozenset(
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    )


async def _http_error(response: httpx.Response, adapter: WireAdapter) -> ProviderError:
    raw = (await response.aread()).decode("utf-8", errors="replace")
    message, code = adapter.error_message(response.status_code, raw)
    message = REDACT(message or response.reason_phrase or "error")
    return ProviderError(
        classify_status(response.status_code, message, code),
        message,
        status=response.status_code,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        code=code,
    )


def _redacted(error: ProviderError) -> ProviderError:
    clean = REDACT(error.message)
    if clean == error.message:
        return error
    return ProviderError(
        error.kind, clean, status=error.status, retry_after=error.retry_after, code=error.code
    )
