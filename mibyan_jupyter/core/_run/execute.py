"""Executing one prepared tool call, then its ``after_tool_call`` hook.

An async tool is awaited on the loop; a sync tool runs in the run's thread pool, in a copy
of the caller's context (so context variables such as the kernel's current cell hold
there too). Progress updates may come from that thread: they hop to the loop and are
emitted in order before the call's result. A tool that raises, times out (our own
deadline, see :mod:`.waiting`) or whose hook raises becomes an error result; only a
cancellation escapes, for the batch to handle.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from mibyan_jupyter.core.config import AfterToolCall
from mibyan_jupyter.core.events import ToolExecutionUpdate
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.tools import ToolResult, as_text

from .prepare import Outcome, Prepared, error_result
from .scope import RunScope
from .waiting import Expired, await_within, maybe_await


async def execute(prepared: Prepared, message: AssistantMessage, scope: RunScope) -> Outcome:
    """Run the call and its ``after_tool_call`` hook; the call's final outcome."""
    call = prepared.call
    timeout = scope.config.tool_timeout
    updates = _Updates(prepared, scope)
    try:
        value = await await_within(_start(prepared, scope, updates.on_update), timeout)
        if inspect.isawaitable(value):
            value = await value
        result = value if isinstance(value, ToolResult) else ToolResult(content=as_text(value))
    except Expired:
        result = error_result(
            f"Tool {call.function.name!r} timed out after {timeout:g} seconds; "
            "split the work into smaller steps."
        )
    except asyncio.CancelledError:
        raise
    except Exception as error:
        result = error_result(f"{type(error).__name__}: {error}")
    finally:
        updates.accepting = False
    await updates.flush()
    return await _after(prepared, result, message, scope)


class _Updates:
    """A call's ``on_update`` callback: thread-safe, in order, ignored once the call ended."""

    __slots__ = ("_emit", "_loop", "_pending", "_prepared", "accepting")

    def __init__(self, prepared: Prepared, scope: RunScope) -> None:
        self._prepared = prepared
        self._emit = scope.emit
        self._loop = asyncio.get_running_loop()
        self._pending: list[asyncio.Future[None]] = []
        self.accepting = True

    def on_update(self, partial: ToolResult) -> None:
        # May be called from a worker thread: hop to the loop, keep the order.
        if self.accepting:
            call = self._prepared.call
            event = ToolExecutionUpdate(call_id=call.id, name=call.function.name, partial=partial)
            self._loop.call_soon_threadsafe(self._schedule, event)

    def _schedule(self, event: ToolExecutionUpdate) -> None:
        self._pending.append(asyncio.ensure_future(self._emit(event)))

    async def flush(self) -> None:
        """Emit the updates already sent, before the call's result is."""
        await asyncio.sleep(0)  # run update callbacks already scheduled from a thread
        if self._pending:
            await asyncio.gather(*self._pending)


def _start(
    prepared: Prepared, scope: RunScope, on_update: Callable[[ToolResult], None]
) -> Awaitable[Any]:
    """The running call: an async tool's coroutine, or a sync tool's pool future."""
    call, tool, signal = prepared.call, prepared.tool, scope.signal
    if tool.is_async:
        return tool.execute(call.id, prepared.args, signal, on_update)  # type: ignore[return-value]
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(
        scope.pool(), context.run, tool.execute, call.id, prepared.args, signal, on_update
    )


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
    except asyncio.CancelledError:
        raise
    except Exception as error:
        return Outcome(
            prepared.call,
            error_result(f"after_tool_call failed: {type(error).__name__}: {error}"),
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
