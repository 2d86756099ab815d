"""The HTTP client of a Streamable HTTP server, watched for a connection that broke.

Why (docs/architecture.md, "Tools from outside"): when a server dies in the middle of a
call, the SDK's transport (1.x) ends the call's event stream quietly and the call waits
for an answer that cannot come, until its timeout (60 s by default). Over stdio the SDK
notices the closed pipe itself ("Connection closed"). Here the client's transport reports
every transport failure (a refused connection, a stream cut short) to ``on_broken`` with
one line, so the connection can fail the calls in flight at once and be restarted.

httpx is imported by the caller (a server's start), never by importing the package.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any


def watched_client(
    headers: Mapping[str, str], timeout: Any, on_broken: Callable[[str], None]
) -> Any:
    """An ``httpx.AsyncClient`` whose transport failures are told to ``on_broken``."""
    import httpx

    class Stream(httpx.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    yield chunk
            except httpx.TransportError as error:
                on_broken(_line(error))
                raise

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Transport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                response = await self._inner.handle_async_request(request)
            except httpx.TransportError as error:
                on_broken(_line(error))
                raise
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = Stream(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx.AsyncClient(
        headers=dict(headers), timeout=timeout, follow_redirects=False, transport=Transport()
    )


def _line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:199] + "…"
