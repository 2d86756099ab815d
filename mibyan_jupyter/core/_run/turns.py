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

from mibyan_jupyter.core.budget import BudgetLimits, BudgetTracker
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
from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolMessage, UserMessage
from mibyan_jupyter.core.notes import DefaultNotes, NoteContext
from mibyan_jupyter.core.notices import NoteNotice
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import StreamFn

from .batch import ToolBatch
from .compact import Compactor
from .grammar import GrammarTracker
from .model_call import ModelCall
from .request import ModelInput, build_request, gather_notes, summary_text
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
        self.budget = BudgetTracker(config.budget or _UNLIMITED)
        self.override: TurnUpdate | None = None
        self.cancelled_externally = False
        self.turn_message: AssistantMessage | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.compactor = Compactor(
            config.compaction,
            self.scope,
            record_usage=self.budget.record_attempt,
            reset_view=self.input.reset,
        )
        self.default_notes = DefaultNotes()
        self.calls = 0

    # -- plumbing ---------------------------------------------------------------------

    async def emit(self, event: AgentEvent) -> None:
        """Events count as emitted once the sink is called (see :mod:`.grammar`)."""
        self.tracker.observe(event)
        self.budget.observe(event)  # what retried and failed-over attempts used counts too
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
                if (used_up := self.budget.exhausted()) is not None:
                    return await self.summarize(used_up)
                message = await self.call_model()
                if await self.compacted_on_overflow(message):  # retried once, in a new turn
                    await self.end_turn(message)
                    await self.start_turn()
                    message = await self.call_model()
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

    async def call_model(self, *, summary_max_tokens: int | None = None) -> AssistantMessage:
        """Compact when due, build the request with its notes, check it, stream the
        reply; record usage and calibrate the token estimate by it."""
        summary = summary_max_tokens is not None
        if not summary:
            await self.compactor.before_call(first=self.calls == 0)
        self.calls += 1
        override, self.override = self.override, None
        try:
            messages = await self.input.messages(override)
        except Exception as error:
            model = (override.model if override else None) or self.config.model
            return await self.unsent(model, error)
        notes = () if summary else await self.notes()
        request = build_request(self.scope, messages, override, summary_max_tokens, notes)

        def record(final: AssistantMessage) -> AssistantMessage:
            final = summary_text(final) if summary else final
            self.turn_message = final
            self.append(final)
            return final

        call = ModelCall(self.scope)
        message = await call.run(request, record)
        self.cancelled_externally |= call.cancelled_externally
        self.budget.record(message.usage)
        self.compactor.calibrate(message.usage)
        await self.emit(self.budget.snapshot())
        return message

    async def notes(self) -> tuple[str, ...]:
        """This request's ephemeral notes, announced by a NoteNotice (core/notes.py)."""
        compactor = self.compactor
        context = NoteContext(self.budget.snapshot(), compactor.last_estimate, compactor.window)
        notes = await gather_notes(self.config, self.default_notes, context)
        if notes:
            await self.emit(NoteNotice(notes=notes))
        return notes

    async def compacted_on_overflow(self, message: AssistantMessage) -> bool:
        """A ``context_overflow`` reply: compact, so the call can be tried once more (the
        failed reply stays for display; the model view never sends it)."""
        if message.stop_reason != "error" or message.error_kind != "context_overflow":
            return False
        if self.signal.aborted:
            return False
        return await self.compactor.on_overflow() is not None

    async def unsent(self, model: str, error: Exception) -> AssistantMessage:
        """The request could not be built (a hook failed, the transcript breaks the rules):
        a failed reply that ends the run with ``error``, and nothing was sent."""
        failed = AssistantMessage(
            stop_reason="error",
            model=model,
            error_message=f"the request was not sent: {type(error).__name__}: {error}",
        )
        self.turn_message = failed
        self.append(failed)
        await self.emit(MessageStart(message=failed))
        await self.emit(MessageEnd(message=failed))
        return failed

    async def run_tools(self, message: AssistantMessage) -> None:
        """Run the message's tool calls; their results are appended as they are emitted."""
        if not message.tool_calls:
            return
        self.batch = batch = ToolBatch(message, self.scope)
        if message.stop_reason == "length":
            await batch.fail_truncated()
        else:
            await batch.run()
        self.cancelled_externally |= batch.cancelled_externally

    async def summarize(self, used_up: str) -> list[Message]:
        """Exactly one final call without tools, asking for a summary of the work."""
        note = UserMessage(
            content=(
                f"[budget] The {self.budget.describe(used_up)} budget is used up. Do not call any "
                "tools. Reply now with a concise summary of the work so far: what was done, what "
                "was found, and what is left to do."
            )
        )
        await self.add_user_messages([note])
        message = await self.call_model(summary_max_tokens=self.config.summary_max_tokens)
        await self.end_turn(message)
        return await self.end("aborted" if message.stop_reason == "aborted" else "budget_exhausted")

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
