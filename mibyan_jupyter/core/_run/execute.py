"""Executing one prepared tool call, then its ``after_tool_call`` hook.

An async tool is awaited on the loop; a sync tool runs in the run's thread pool, in a copy
of the caller's context (so context variables such as the kernel's current cell hold
there too). Progress updates may come from that thread: they hop to the loop and are
emitted in order, and none after the call ended (a thread that keeps reporting after its
tool returned, or after the run was cancelled, is ignored).

Whatever the tool raises becomes an error result: any ``Exception``, and the
``BaseException`` kinds ordinary code raises too — ``SystemExit`` (``argparse`` inside a
tool), ``GeneratorExit``, a library's own subclass, a ``CancelledError`` of a future the
tool owns. Only two pass through, because they mean "stop the run", not "this call
failed": the run's own cancellation (the task was asked to cancel; the batch handles it)
and ``KeyboardInterrupt`` (Kernel > Interrupt; the batch turns it into the end of the run). The tool's exception is caught
inside the coroutine that runs it, so ``SystemExit`` never reaches an asyncio task, which
would re-raise it out of the kernel's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from mibyan_jupyter.core.config import AfterToolCall
from mibyan_jupyter.core.events import ToolExecutionUpdate
from mibyan_jupyter.core.json_text import as_text
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.tools import ToolResult

from .prepare import (
    Outcome,
    Prepared,
    closing,
    describe_error,
    error_result,
    passes_through,
)
from .scope import RunScope
from .waiting import Expired, await_within, maybe_await


class _Raised:
    """What a tool raised, carried out of its thread or coroutine as a value."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def execute(prepared: Prepared, message: AssistantMessage, scope: RunScope) -> Outcome:
    """Run the call and its ``after_tool_call`` hook; the call's final outcome. Raises
    only ``CancelledError`` and ``KeyboardInterrupt``."""
    call = prepared.call
    timeout = scope.config.tool_timeout
    updates = _Updates(prepared, scope)
    try:
        value = await await_within(_start(prepared, scope, updates.on_update), timeout)
        if not isinstance(value, _Raised) and inspect.isawaitable(value):
            value = await _guarded(value)  # a sync execute that returned an awaitable
        if isinstance(value, _Raised):
            if isinstance(value.error, KeyboardInterrupt):
                raise value.error
            result = error_result(describe_error(value.error))
        else:
            result = value if isinstance(value, ToolResult) else ToolResult(content=as_text(value))
    except Expired:
        result = error_result(
            f"Tool {call.function.name!r} timed out after {timeout:g} seconds; "
            "split the work into smaller steps."
        )
    except BaseException as error:
        if closing(error):  # this coroutine is being closed: no await may follow
            updates.accepting = False
            raise
        await updates.abandon()
        if passes_through(error):
            raise
        result = error_result(describe_error(error))
    await updates.close()
    return await _after(prepared, result, message, scope)


async def _guarded(awaitable: Awaitable[Any]) -> Any:
    """The tool's coroutine, with what it raises returned as :class:`_Raised`."""
    try:
        return await awaitable
    except BaseException as error:
        # Even KeyboardInterrupt is returned: this may run in a task of its own (a tool
        # timeout), and a task re-raises it out of the event loop. The caller raises it.
        if closing(error) or (isinstance(error, asyncio.CancelledError) and _cancelling()):
            raise
        return _Raised(error)  # a CancelledError of the tool's own making too


def _cancelling() -> bool:
    """Whether this task was asked to cancel (the run's own cancellation), as opposed to
    a ``CancelledError`` the tool raised or let out of a future it owns."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _run_sync(execute: Callable[..., Any], *args: Any) -> Any:
    """In the worker thread: the sync tool, with what it raises returned as a value."""
    try:
        return execute(*args)
    except BaseException as error:
        return _Raised(error)


def _start(
    prepared: Prepared, scope: RunScope, on_update: Callable[[ToolResult], None]
) -> Awaitable[Any]:
    """The running call: an async tool's coroutine, or a sync tool's pool future."""
    call, tool, signal = prepared.call, prepared.tool, scope.signal
    if tool.is_async:
        return _guarded(tool.execute(call.id, prepared.args, signal, on_update))  # type: ignore[arg-type]
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(
        scope.pool(),
        context.run,
        _run_sync,
        tool.execute,
        call.id,
        prepared.args,
        signal,
        on_update,
    )


class _Updates:
    """A call's ``on_update`` callback: thread-safe; updates are emitted one at a time, in
    order, by one pump task; none is accepted or emitted once the call ended."""

    __slots__ = ("_emit", "_loop", "_prepared", "_pump", "_queue", "accepting")

    def __init__(self, prepared: Prepared, scope: RunScope) -> None:
        self._prepared = prepared
        self._emit = scope.emit
        self._loop = asyncio.get_running_loop()
        self._queue: deque[ToolExecutionUpdate] = deque()
        self._pump: asyncio.Task[None] | None = None
        self.accepting = True

    def on_update(self, partial: ToolResult) -> None:
        # May be called from a worker thread, also long after the call ended.
        if not self.accepting:
            return
        call = self._prepared.call
        event = ToolExecutionUpdate(call_id=call.id, name=call.function.name, partial=partial)
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is long over
            self._loop.call_soon_threadsafe(self._push, event)

    def _push(self, event: ToolExecutionUpdate) -> None:
        if not self.accepting:  # checked again on the loop: the call may have ended since
            return
        self._queue.append(event)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            await self._emit(self._queue.popleft())

    async def close(self) -> None:
        """The call finished: emit the updates sent before it did, then accept no more
        (cancelled meanwhile: the pump is stopped before the cancellation goes on)."""
        try:
            await asyncio.sleep(0)  # run update callbacks already scheduled from a thread
            self.accepting = False
            if self._pump is not None:
                await self._pump
        except asyncio.CancelledError:
            await self.abandon()
            raise

    async def abandon(self) -> None:
        """The call was cut short: drop what waits and stop the pump before its End."""
        self.accepting = False
        self._queue.clear()
        pump, self._pump = self._pump, None
        if pump is not None and not pump.done():
            pump.cancel()
            await asyncio.wait({pump})


async def _after(
    prepared: Prepared, result: ToolResult, message: AssistantMessage, scope: RunScope
) -> Outcome:
    """``after_tool_call`` may replace parts of the result; if it raises, that is the
    result the model sees."""
    hook = scope.config.after_tool_call
    if hook is None:
        return Outcome(prepared.call, result)
    context = AfterToolCall(
        message, prepared.call, prepared.tool, prepared.args, result, scope.transcript
    )
    try:
        override = await maybe_await(hook(context, scope.signal))
    except BaseException as error:
        if passes_through(error):
            raise
        return Outcome(
            prepared.call, error_result(f"after_tool_call failed: {describe_error(error)}")
        )
    if override is None:
        return Outcome(prepared.call, result)
    return Outcome(
        prepared.call,
        ToolResult(
            content=result.content if override.content is None else override.content,
            details=result.details if override.details is None else override.details,
            is_error=result.is_error if override.is_error is None else override.is_error,
        ),
    )
