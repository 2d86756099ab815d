"""The state and the turns of one loop invocation (the sequence is in :mod:`.loop`).

:class:`LoopRun` owns what changes during a run: the transcript it appends to, the
messages it added, the grammar tracker, the budget, the current turn's message and tool
results. Its parts (the model call, the tool batch) get the run's :class:`RunScope`
instead, so they can emit and append but not reach into this state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias

from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.budget_gate import BudgetGate, BudgetRefused, Reservation
from mibyan_jupyter.core.config import AgentContext, LoopConfig, TurnContext, TurnUpdate
from mibyan_jupyter.core.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    EndReason,
    MessageEnd,
    MessageStart,
    TurnEnd,
    TurnStart,
)
from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolMessage, Usage
from mibyan_jupyter.core.notes import DefaultNotes, NoteContext
from mibyan_jupyter.core.notices import NoteNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamFn

from .batch import ToolBatch
from .budgeted import RunBudget, clamped
from .compact import Compactor
from .grammar import GrammarTracker
from .model_call import ModelCall
from .request import ModelInput, build_request, gather_notes, summary_note, summary_text
from .scope import RunScope
from .waiting import maybe_await

EventSink: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]
"""Where a run's events go: sync or async (the Agent's dispatch, a queue's put)."""

_UNLIMITED = BudgetLimits(max_turns=None)


class LoopRun:
    """The state of one loop invocation, and its turns."""

    def __init__(
        self,
        context: AgentContext,
        config: LoopConfig,
        signal: AbortSignal,
        stream_fn: StreamFn,
        sink: EventSink,
    ) -> None:
        self.config = config
        self.signal = signal
        self.sink = sink
        self.scope = RunScope(context, config, signal, stream_fn, self.emit, self.append, self.pool)
        self.messages: list[Message] = context.messages
        self.new_messages: list[Message] = []
        self.tracker = GrammarTracker()
        self.turn_results: list[ToolMessage] = []
        self.batch: ToolBatch | None = None
        self.input = ModelInput(context.messages, config, signal)
        self.gate = config.budget_gate or BudgetGate(config.budget or _UNLIMITED)
        self.budget = self.gate.tracker
        self.run_budget = RunBudget(self.gate, config, self.scope)
        self.override: TurnUpdate | None = None
        self.cancelled_externally = False
        self.turn_message: AssistantMessage | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.compactor = Compactor(
            config.compaction,
            self.scope,
            budget=self.run_budget,
            reset_view=self.input.reset,
        )
        self.default_notes = DefaultNotes()
        self.calls = 0

    # -- plumbing ---------------------------------------------------------------------

    async def emit(self, event: AgentEvent) -> None:
        """Events count as emitted once the sink is called (see :mod:`.grammar`)."""
        self.tracker.observe(event)
        result = self.sink(event)
        if result is not None:
            await result

    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.config.tool_threads, thread_name_prefix="mibyan-tool"
            )
        return self._pool

    def append(self, message: Message) -> None:
        """Add a finished message to the transcript; always before its MessageEnd, so a
        run cut short at any point leaves transcript and events in agreement."""
        index = len(self.messages)
        self.messages.append(message)
        self.new_messages.append(message)
        if isinstance(message, ToolMessage):
            self.turn_results.append(message)
        self.input.appended(message, index)

    async def add_user_messages(self, messages: Sequence[Message]) -> None:
        for message in messages:
            self.append(message)
            await self.emit(MessageStart(message=message))
            await self.emit(MessageEnd(message=message))

    async def poll(self, hook: Callable[[], Any] | None) -> list[Message]:
        if hook is None:
            return []
        return list(await maybe_await(hook()))

    async def start_turn(self) -> None:
        self.turn_message = None
        self.turn_results = []
        self.batch = None
        await self.emit(TurnStart())

    async def end_turn(self, message: AssistantMessage | None) -> None:
        await self.emit(TurnEnd(message=message, tool_results=tuple(self.turn_results)))

    async def end(self, reason: EndReason) -> list[Message]:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        await self.emit(AgentEnd(messages=tuple(self.new_messages), reason=reason))
        if self.cancelled_externally:
            raise asyncio.CancelledError
        return self.new_messages

    # -- the loop ---------------------------------------------------------------------

    async def run(self, prompts: Sequence[Message], *, steering_poll: bool = True) -> list[Message]:
        """``steering_poll=False`` when the prompts were just taken from the queues
        (a second poll would deliver two messages in one-at-a-time mode)."""
        try:
            await self.emit(AgentStart())
            await self.start_turn()
            await self.add_user_messages(prompts)
            steering = self.config.get_steering_messages if steering_poll else None
            return await self.turns(await self.poll(steering))
        except asyncio.CancelledError:
            # Cancelled outside the handling of a model call or tool batch (for instance
            # while an async subscriber awaited), or re-raised by end() after AgentEnd.
            soft = False if self.cancelled_externally else self.signal.absorb_cancel()
            self.cancelled_externally = not soft
            await self.close_after_failure("aborted")
            if soft:
                return self.new_messages
            raise
        except Exception:
            await self.close_after_failure("error")
            raise

    async def turns(self, pending: list[Message]) -> list[Message]:
        last_turn: TurnContext | None = None
        while True:
            more_tool_calls = True
            while more_tool_calls or pending:
                if last_turn is not None:
                    hook = self.config.prepare_next_turn
                    self.override = await maybe_await(hook(last_turn)) if hook else None
                    if not pending:
                        pending = await self.poll(self.config.get_steering_messages)
                    await self.start_turn()
                await self.add_user_messages(pending)
                pending = []
                if self.signal.aborted:
                    await self.end_turn(None)
                    return await self.end("aborted")
                message = await self.call_model()
                if message is not None and await self.compacted_on_overflow(message):
                    await self.end_turn(message)  # retried once, in a new turn
                    await self.start_turn()
                    message = await self.call_model()
                if message is None:  # the budget cannot pay for the call: summarize
                    return await self.summarize()
                if message.error_kind == "budget":  # nor for another attempt of it
                    await self.end_turn(message)
                    await self.start_turn()
                    return await self.summarize()
                if message.stop_reason in ("error", "aborted"):
                    await self.end_turn(message)
                    return await self.end(
                        "aborted" if message.stop_reason == "aborted" else "error"
                    )
                await self.run_tools(message)
                results = tuple(self.turn_results)
                more_tool_calls = bool(message.tool_calls)
                await self.end_turn(message)
                if self.signal.aborted:
                    return await self.end("aborted")
                last_turn = TurnContext(message, results, self.messages, self.new_messages)
                stop = self.config.should_stop_after_turn
                if stop is not None and await maybe_await(stop(last_turn)):
                    return await self.end("stopped_by_hook")
                pending = await self.poll(self.config.get_steering_messages)
            pending = await self.poll(self.config.get_follow_up_messages)
            if not pending:
                return await self.end("completed")

    async def call_model(self) -> AssistantMessage | None:
        """Compact when due, build the request with its notes, reserve its worst case
        (``None``: the budget cannot pay for it, see ``run_budget.used_up``), stream it."""
        await self.compactor.before_call(first=self.calls == 0)
        self.calls += 1
        override, self.override = self.override, None
        try:
            messages = await self.input.messages(override)
        except Exception as error:
            model = (override.model if override else None) or self.config.model
            return await self.unsent(model, error)
        notes = await self.notes()
        request = build_request(self.scope, messages, override, None, notes)
        reservation = await self.run_budget.reserve_turn(request)
        if reservation is None:
            return None
        if notes:  # announced only for a request that is sent
            await self.emit(NoteNotice(notes=notes))
        return await self.stream(clamped(request, reservation), reservation, summary=False)

    async def stream(
        self, request: ModelRequest, reservation: Reservation, *, summary: bool
    ) -> AssistantMessage:
        """Stream a reserved request; settle its reservation with what every attempt
        used, and calibrate the token estimates by it."""

        kept: list[AssistantMessage] = []

        def record(final: AssistantMessage) -> AssistantMessage:
            final = summary_text(final) if summary else final
            self.turn_message = final
            self.append(final)
            kept.append(final)
            return final

        def may_go_on(event: AgentEvent) -> bool:
            return self.run_budget.observe(event, reservation)

        call = ModelCall(self.scope)
        try:
            message = await call.run(request, record, may_go_on)
        finally:  # also when a subscriber's failure cuts the call short: nothing stays held
            self.run_budget.settle(reservation, kept[0].usage if kept else Usage())
        self.cancelled_externally |= call.cancelled_externally
        self.compactor.calibrate(message.usage)
        await self.emit(self.budget.snapshot())
        return message

    async def notes(self) -> tuple[str, ...]:
        """This request's ephemeral notes (core/notes.py); the caller announces them."""
        compactor = self.compactor
        context = NoteContext(self.budget.snapshot(), compactor.last_estimate, compactor.window)
        return await gather_notes(self.config, self.default_notes, context)

    async def compacted_on_overflow(self, message: AssistantMessage) -> bool:
        """A ``context_overflow`` reply: compact, so the call can be tried once more (the
        failed reply stays for display; the model view never sends it)."""
        if message.stop_reason != "error" or message.error_kind != "context_overflow":
            return False
        if self.signal.aborted:
            return False
        return await self.compactor.on_overflow() is not None

    async def unsent(self, model: str, error: Exception | str) -> AssistantMessage:
        """The request could not be built (a hook failed, the transcript breaks the rules)
        or paid for (``error`` says why): a failed reply, and nothing was sent."""
        if isinstance(error, Exception):
            error = f"the request was not sent: {type(error).__name__}: {error}"
        failed = AssistantMessage(stop_reason="error", model=model, error_message=error)
        self.turn_message = failed
        self.append(failed)
        await self.emit(MessageStart(message=failed))
        await self.emit(MessageEnd(message=failed))
        return failed

    async def run_tools(self, message: AssistantMessage) -> None:
        """Run the message's tool calls; their results are appended as they are emitted."""
        if not message.tool_calls:
            return
        budget = self.budget
        before = (budget.input_tokens, budget.output_tokens, budget.cost)
        self.batch = batch = ToolBatch(message, self.scope)
        if message.stop_reason == "length":
            await batch.fail_truncated()
        else:
            await batch.run()
        self.cancelled_externally |= batch.cancelled_externally
        if (budget.input_tokens, budget.output_tokens, budget.cost) != before:
            # A delegated child spent from this run's gate (core/delegation.py): the budget
            # bars show it now, not only after the next model call (which may never come).
            await self.emit(budget.snapshot())

    async def summarize(self) -> list[Message]:
        """Exactly one final call without tools, asking for a summary of the work. The
        instruction is a note on that request (docs/architecture.md, "Prompt builder"),
        never a message of the transcript; the call is reserved inside the cap (the room
        was kept back), and when not even that fits, nothing is sent and one line says so."""
        used_up = self.run_budget.used_up or "turns"
        text = summary_note(self.budget.describe(used_up))
        try:
            messages = await self.input.messages(None)
        except Exception as error:
            return await self.ended_unsent(error)
        request = build_request(self.scope, messages, None, self.config.summary_max_tokens, (text,))
        try:
            reservation = self.run_budget.reserve_summary(request)
        except BudgetRefused:
            return await self.ended_unsent(
                f"the budget is used up ({self.budget.describe(used_up)}) and cannot pay "
                "even for a short summary, so nothing more was sent"
            )
        self.calls += 1
        await self.emit(NoteNotice(notes=(text,)))  # shown as a notice, never as "You"
        message = await self.stream(clamped(request, reservation), reservation, summary=True)
        await self.end_turn(message)
        return await self.end("aborted" if message.stop_reason == "aborted" else "budget_exhausted")

    async def ended_unsent(self, why: str | Exception) -> list[Message]:
        """The summary could not be sent: one failed reply saying why (never sent to a
        model later), and the run ends ``budget_exhausted``."""
        await self.end_turn(await self.unsent(self.config.model, why))
        return await self.end("budget_exhausted")

    async def close_after_failure(self, reason: EndReason) -> None:
        """An exception escaped (a subscriber failed, or the task was cancelled outside the
        handling of a model call or tool batch): emit exactly the closing events still
        missing and give every tool call of the turn a result, then let it go on."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self.tracker.agent_ended:
            return
        steps, self.turn_message = self.tracker.closing_events(
            turn_message=self.turn_message,
            turn_results=self.turn_results,
            finished=self.batch.finished if self.batch is not None else {},
            append=self.append,
            new_messages=self.new_messages,
            reason=reason,
        )
        for event in steps:
            try:
                await self.emit(event)
            except asyncio.CancelledError:  # cancelled again: finish closing, then report it
                self.cancelled_externally = True
            except Exception:  # a broken subscriber must not stop the closing events
                pass
