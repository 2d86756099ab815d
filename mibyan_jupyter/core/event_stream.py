"""The loop as an async iterator of events: ``agent_loop`` / ``agent_loop_continue``.

pi returns an event stream from its loop functions; this is that form, for callers who
want to ``async for`` over a run. It runs :func:`run_agent_loop` in a task and queues the
events it emits. The Agent uses the sink form directly (no queue in between).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from ._run.loop import EventSink, check_continue, run_agent_loop, run_agent_loop_continue
from .config import AgentContext, LoopConfig
from .events import AgentEvent
from .messages import Message
from .signal import AbortSignal
from .stream import StreamFn


class AgentEventStream:
    """Events of a loop running in a background task, as an async iterator.

    ``result()`` returns the new messages. Leaving the iteration early does not stop the
    run; ``aclose()`` does (it cancels the task).
    """

    def __init__(self, start: Callable[[EventSink], Awaitable[list[Message]]]) -> None:
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._task = asyncio.ensure_future(start(self._queue.put_nowait))
        # Also when the task is cancelled before its first step: the iteration must end.
        self._task.add_done_callback(lambda _: self._queue.put_nowait(None))

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self

    async def __anext__(self) -> AgentEvent:
        event = await self._queue.get()
        if event is None:
            if self._task.done() and not self._task.cancelled() and self._task.exception():
                raise self._task.exception()  # type: ignore[misc]
            raise StopAsyncIteration
        return event

    async def result(self) -> list[Message]:
        return await self._task

    async def aclose(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def agent_loop(
    prompts: Sequence[Message],
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
) -> AgentEventStream:
    """Start the loop in a task; iterate the returned stream for its events."""
    return AgentEventStream(
        lambda emit: run_agent_loop(prompts, context, config, signal, stream_fn, emit)
    )


def agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
) -> AgentEventStream:
    """Like :func:`run_agent_loop_continue`, as a stream. An empty context raises here."""
    check_continue(context)
    return AgentEventStream(
        lambda emit: run_agent_loop_continue(context, config, signal, stream_fn, emit)
    )
