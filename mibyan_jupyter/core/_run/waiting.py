"""Two small awaiting helpers the loop, the tool batch and the approval gate share.

``maybe_await``: hooks may be sync or async. ``await_within``: a deadline of our own that
cannot be confused with a ``TimeoutError`` the awaited code raises itself (a tool's socket
timeout, an approver's own failure) — ``asyncio.wait_for`` would merge the two.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Expired(Exception):
    """Our own deadline passed (see :func:`await_within`)."""


async def maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


async def await_within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """Await with a deadline; raises :class:`Expired` (and cancels the work) when it
    passes. Cancelling the caller cancels the work too."""
    if seconds is None:
        return await awaitable
    future = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({future}, timeout=seconds)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not done:
        future.cancel()
        raise Expired
    return future.result()
