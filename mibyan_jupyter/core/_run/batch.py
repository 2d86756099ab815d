"""Running the tool calls of one assistant message: prepare, execute, finalize.

Preparation is one call at a time (lookup, ``prepare_arguments``, JSON and schema
validation, ``before_tool_call``, approval); a call rejected there gets its error result at
once and keeps its place. Then, in ``parallel`` mode, the allowed calls run concurrently
(async tools awaited, sync tools in a bounded thread pool) and their ToolExecutionEnd
events arrive in completion order, while the result messages follow in call order. A tool
flagged ``sequential`` makes its whole batch sequential.

Approvals are the exception to "one at a time": every call the policy would ask about
(``ApprovalGate.would_ask``) is started and prepared at once, in a task of its own, so all
of a batch's questions are open together and can be answered in any order. In a parallel
batch such a call runs as soon as it is approved; in a sequential batch the calls still
run one at a time in call order, each once it is decided, and a call nobody is asked about
starts only when its turn comes (docs/architecture.md, "One `%%agent` cell, end to end").

Every call of the batch gets exactly one result, also when the batch is aborted: calls
that had not finished get "cancelled by the user" (a sync tool's thread cannot be killed;
it sees ``signal.aborted`` and its late result is dropped). Every result becomes its
message in one place (:func:`.sanitize.tool_message`), so no tool can put text into the
transcript that a request, the store or an export could not encode.

A ``KeyboardInterrupt`` from a tool or hook (Kernel > Interrupt while code runs on the
loop's thread) is not a tool error: it stops the run. The call and every call not finished
get "cancelled", the batch ends as an abort would, then the run is marked cancelled from
outside, so it closes its events and re-raises ``CancelledError`` after ``AgentEnd``
(docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from mibyan_jupyter.core.events import (
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, ToolCall, ToolMessage
from mibyan_jupyter.core.tools import CANCELLED

from .batch_steps import kept_aside, truncated_callerror_result, would_ask
from .execute import execute
from .prepare import Outcome, Prepared, display_args, error_result, prepare_call
from .sanitize import tool_message
from .scope import RunScope

INTERRUPTED = "interrupted (KeyboardInterrupt in a tool)"
"""The abort reason of a run a tool's ``KeyboardInterrupt`` stopped."""


class ToolBatch:
    """Executes one assistant message's tool calls; ``run()`` returns results in call order."""

    def __init__(self, message: AssistantMessage, scope: RunScope) -> None:
        self._message = message
        self._scope = scope
        self._emit = scope.emit
        self._signal = scope.signal
        self._started: set[str] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self.finished: dict[str, ToolMessage] = {}
        """Results by call id, recorded before their ToolExecutionEnd is emitted."""
        self.cancelled_externally = False
        self.interrupted = False
        """A tool or hook raised ``KeyboardInterrupt``: the run stops after this batch."""

    @property
    def sequential(self) -> bool:
        if self._scope.config.tool_execution == "sequential":
            return True
        tools = self._scope.tools
        return any(
            (tool := tools.get(call.function.name)) is not None and tool.sequential
            for call in self._message.tool_calls
        )

    async def fail_truncated(self) -> list[ToolMessage]:
        """A ``length`` stop: no call runs; each gets an error asking to re-issue it."""
        results = []
        for call in self._message.tool_calls:
            await self._emit(
                ToolExecutionStart(
                    call_id=call.id, name=call.function.name, args=display_args(call)
                )
            )
            results.append(
                await self._finish(
                    Outcome(call, error_result(truncated_callerror_result(call.function.name)))
                )
            )
        return [await self._emit_result(r) for r in results]

    async def run(self) -> list[ToolMessage]:
        """Interruptible: an abort cancels what runs and every call still gets a result."""
        with self._signal.interruptible():
            if self.sequential:
                results = await self._run_sequential()
            else:
                results = await self._run_parallel()
        if self.interrupted:  # outside the interruptible phase: aborting cancels nothing here
            self.cancelled_externally = True
            self._signal.abort(INTERRUPTED)
        return results

    @property
    def _stopping(self) -> bool:
        return self._signal.aborted or self.interrupted

    def _interrupt(self) -> None:
        """A ``KeyboardInterrupt`` arrived: the calls still running are cancelled."""
        self.interrupted = True
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current and not task.done():
                task.cancel()

    # -- sequential -------------------------------------------------------------------

    async def _run_sequential(self) -> list[ToolMessage]:
        calls = self._message.tool_calls
        ahead = await self._ask_ahead(calls)
        messages: list[ToolMessage] = []
        for call in calls:
            early = ahead.get(call.id)
            try:
                if self._stopping:
                    outcome = await self._abandon(call, early)
                else:
                    if call.id not in self._started:
                        await self._start(call)
                    prepared = await (early or self._prepare_guarded(call))
                    outcome = (
                        prepared if isinstance(prepared, Outcome) else await self._execute(prepared)
                    )
            except asyncio.CancelledError:
                self._note_cancel()
                outcome = await self._abandon(call, early)
            except KeyboardInterrupt:
                self._interrupt()
                outcome = await self._abandon(call, early)
            if call.id not in self._started:
                await self._start(call)
            messages.append(await self._emit_result(await self._finish(outcome)))
        return messages

    async def _ask_ahead(
        self, calls: Sequence[ToolCall]
    ) -> dict[str, asyncio.Task[Prepared | Outcome]]:
        """Start and prepare, each in a task, the calls the policy would ask about, so
        their questions are all open before the first call runs."""
        ahead: dict[str, asyncio.Task[Prepared | Outcome]] = {}
        try:
            for call in calls:
                if self._stopping:
                    break
                if would_ask(call, self._scope):
                    await self._start(call)
                    ahead[call.id] = task = asyncio.ensure_future(self._prepare_guarded(call))
                    self._tasks.append(task)
        except asyncio.CancelledError:
            self._note_cancel()
        return ahead

    async def _abandon(
        self, call: ToolCall, early: asyncio.Task[Prepared | Outcome] | None
    ) -> Outcome:
        """The batch stops before ``call`` ran: its open question is resolved (its task
        cancelled and awaited); a rejection it already had is kept."""
        if early is not None:
            if not early.done():
                early.cancel()
            await asyncio.wait({early})
            if not early.cancelled() and isinstance(outcome := early.result(), Outcome):
                return outcome
        return Outcome(call, error_result(CANCELLED))

    # -- parallel ---------------------------------------------------------------------

    async def _run_parallel(self) -> list[ToolMessage]:
        calls = self._message.tool_calls
        slots: list[ToolMessage | asyncio.Task[ToolMessage] | None] = [None] * len(calls)
        try:
            for index, call in enumerate(calls):
                await self._start(call)
                if self._stopping:
                    slots[index] = await self._finish(Outcome(call, error_result(CANCELLED)))
                    continue
                if would_ask(call, self._scope):  # asked now, run once approved
                    task = asyncio.ensure_future(self._prepare_and_finish(call))
                else:
                    prepared = await self._prepare(call)
                    if isinstance(prepared, Outcome):
                        slots[index] = await self._finish(prepared)
                        continue
                    task = asyncio.ensure_future(self._execute_and_finish(prepared))
                self._tasks.append(task)
                slots[index] = task
            if self._tasks:
                await asyncio.gather(*self._tasks)
        except asyncio.CancelledError:
            self._note_cancel()
            await self._cancel_remaining(calls, slots)
        except KeyboardInterrupt:  # from a hook during preparation
            self._interrupt()
            await self._cancel_remaining(calls, slots)
        results = [slot.result() if isinstance(slot, asyncio.Task) else slot for slot in slots]
        messages = [r for r in results if r is not None]
        return [await self._emit_result(m) for m in messages]

    async def _cancel_remaining(
        self, calls: Sequence[ToolCall], slots: list[ToolMessage | asyncio.Task[ToolMessage] | None]
    ) -> None:
        tasks = [slot for slot in slots if isinstance(slot, asyncio.Task)]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for index, call in enumerate(calls):
            slot = slots[index]
            if isinstance(slot, asyncio.Task) and slot.cancelled():  # before it ran or ended
                known = self.finished.get(call.id)
                slots[index] = known or await self._finish(Outcome(call, error_result(CANCELLED)))
            elif slot is None:
                if call.id not in self._started:
                    await self._start(call)
                slots[index] = await self._finish(Outcome(call, error_result(CANCELLED)))

    async def _prepare_and_finish(self, call: ToolCall) -> ToolMessage:
        """A call that waits for its approval in its own task, then runs."""
        try:
            prepared = await self._prepare(call)
        except asyncio.CancelledError:
            return await self._finish(Outcome(call, error_result(CANCELLED)))
        except KeyboardInterrupt:  # caught here: a task would re-raise it out of the loop
            self._interrupt()
            return await self._finish(Outcome(call, error_result(CANCELLED)))
        if isinstance(prepared, Outcome):
            return await self._finish(prepared)
        if self._stopping:
            return await self._finish(Outcome(call, error_result(CANCELLED)))
        return await self._execute_and_finish(prepared)

    async def _execute_and_finish(self, prepared: Prepared) -> ToolMessage:
        try:
            outcome = await self._execute(prepared)
        except asyncio.CancelledError:
            outcome = Outcome(prepared.call, error_result(CANCELLED))
        except KeyboardInterrupt:  # caught here: a task would re-raise it out of the loop
            self._interrupt()
            outcome = Outcome(prepared.call, error_result(CANCELLED))
        return await self._finish(outcome)

    # -- steps ------------------------------------------------------------------------

    async def _start(self, call: ToolCall) -> None:
        self._started.add(call.id)
        await self._emit(
            ToolExecutionStart(call_id=call.id, name=call.function.name, args=display_args(call))
        )

    async def _prepare(self, call: ToolCall) -> Prepared | Outcome:
        return await prepare_call(call, self._message, self._scope)

    async def _prepare_guarded(self, call: ToolCall) -> Prepared | Outcome:
        """Preparation that may run in a task: ``KeyboardInterrupt`` becomes the
        interruption of the batch (a task would re-raise it out of the loop)."""
        try:
            return await self._prepare(call)
        except KeyboardInterrupt:
            self._interrupt()
            return Outcome(call, error_result(CANCELLED))

    async def _execute(self, prepared: Prepared) -> Outcome:
        return await execute(prepared, self._message, self._scope)

    async def _finish(self, outcome: Outcome) -> ToolMessage:
        call, result = outcome.call, outcome.result
        known = self.finished.get(call.id)
        if known is not None:  # already finished (its End may have been cancelled)
            return known
        message = kept_aside(tool_message(call.id, call.function.name, result), self._scope)
        self.finished[call.id] = message
        await self._emit(
            ToolExecutionEnd(
                call_id=call.id, name=call.function.name, result=message, is_error=message.is_error
            )
        )
        return message

    async def _emit_result(self, message: ToolMessage) -> ToolMessage:
        self._scope.append(message)
        await self._emit(MessageStart(message=message))
        await self._emit(MessageEnd(message=message))
        return message

    def _note_cancel(self) -> None:
        if not self._signal.absorb_cancel():
            self.cancelled_externally = True
