"""The agent loop: pi's ``agentLoop`` / ``agentLoopContinue``, in Python.

``run_agent_loop(prompts, context, config, signal, stream_fn, emit)`` adds the prompts,
then repeats turns: (steering messages) -> model call -> tool batch -> TurnEnd, until the
model stops asking for tools and no steering or follow-up message is queued. The sequence,
as in pi's diagram:

1. AgentStart, TurnStart, the prompts' MessageStart/End; an initial steering poll.
2. Each turn: ``prepare_next_turn`` (from the second turn on), a steering poll if nothing is
   pending, TurnStart; pending messages are added; the budget is checked (when used up:
   one summary call without tools, then AgentEnd ``budget_exhausted``);
   ``transform_context`` then ``convert_to_llm`` (or the incremental model view), the
   alternation check, the model call; an ``error`` / ``aborted`` reply ends the run.
3. Tool calls run as a batch (all failed at once on a ``length`` stop); TurnEnd;
   ``should_stop_after_turn``; steering is polled only after the whole batch.
4. When the agent would stop, follow-ups are polled; if there are some, the loop goes on.
5. AgentEnd, exactly once, whatever happened.

Work per turn does not depend on the history's length: the model view is kept
incrementally and handed to the model without copying.

Cancellation: ``signal.abort()`` interrupts the model stream or tool batch at once (see
:mod:`.signal`). Cancelling the task that runs the loop does the same, then the loop
re-raises ``CancelledError`` after AgentEnd so the canceller sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .budget import BudgetLimits, BudgetTracker
from .config import AgentContext, LoopConfig, TurnContext, TurnUpdate
from .events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    EndReason,
    MessageEnd,
    MessageStart,
    TurnEnd,
    TurnStart,
)
from .grammar import GrammarTracker
from .messages import AssistantMessage, Message, ToolMessage, UserMessage
from .model_call import ModelCall
from .signal import AbortSignal
from .stream import ModelRequest, StreamFn
from .tool_batch import ToolBatch
from .transcript import ModelView, TranscriptError, validate_transcript
from .waiting import maybe_await

EventSink = Callable[[AgentEvent], Awaitable[None] | None]
T = TypeVar("T")

_UNLIMITED = BudgetLimits(max_turns=None)


class _LoopRun:
    """The state of one loop invocation."""

    def __init__(
        self,
        context: AgentContext,
        config: LoopConfig,
        signal: AbortSignal,
        stream_fn: StreamFn,
        sink: EventSink,
    ) -> None:
        self.context = context
        self.config = config
        self.signal = signal
        self.stream_fn = stream_fn
        self.sink = sink
        self.messages: list[Message] = context.messages
        self.new_messages: list[Message] = []
        self.tracker = GrammarTracker()
        self.turn_results: list[ToolMessage] = []
        self.batch: ToolBatch | None = None
        self.view: ModelView | None = None
        self.view_error: TranscriptError | None = None
        self.budget = BudgetTracker(config.budget or _UNLIMITED)
        self.override: TurnUpdate | None = None
        self.cancelled_externally = False
        self.turn_message: AssistantMessage | None = None
        self._pool: ThreadPoolExecutor | None = None

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
        if self.view is not None and self.view_error is None:
            try:
                self.view.append(message, index)
            except TranscriptError as error:
                self.view_error = error

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
            soft = False if self.cancelled_externally else self.signal._absorb_cancel()
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
        """Build the request, check it, stream the reply; record usage."""
        override, self.override = self.override, None
        config = self.config
        model = (override.model if override else None) or config.model
        call = ModelCall(self.stream_fn, self.signal, self.emit)
        try:
            messages = await self.model_messages(override)
        except Exception as error:
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
        summary = summary_max_tokens is not None
        request = ModelRequest(
            model=model,
            system_prompt=self.context.system_prompt,
            messages=messages,
            tools=() if summary else self.context.tools.specs(),
            thinking_level=(override.thinking_level if override else None) or config.thinking_level,
            max_tokens=summary_max_tokens if summary else config.max_tokens,
            tool_choice="none" if summary else "auto",
            options=config.options,
        )

        def record(final: AssistantMessage) -> AssistantMessage:
            final = _summary_text(final) if summary else final
            self.turn_message = final
            self.append(final)
            return final

        message = await call.run(request, record)
        self.cancelled_externally |= call.cancelled_externally
        self.budget.record(message.usage)
        await self.emit(self.budget.snapshot())
        return message

    async def model_messages(self, override: TurnUpdate | None) -> Sequence[Message]:
        if override is not None and override.messages is not None:
            validate_transcript(override.messages, ready_for_model=True)
            return override.messages
        config = self.config
        if config.transform_context is None and config.convert_to_llm is None:
            if self.view is None:
                self.view = ModelView(self.messages)
            if self.view_error is not None:
                raise self.view_error
            self.view.check_ready()
            return self.view.messages
        messages: Sequence[Message] = self.messages
        if config.transform_context is not None:
            messages = await maybe_await(config.transform_context(messages, self.signal))
        if config.convert_to_llm is not None:
            converted = await maybe_await(config.convert_to_llm(messages))
            validate_transcript(converted, ready_for_model=True)
            return converted
        view = ModelView(messages)
        view.check_ready()
        return view.messages

    async def run_tools(self, message: AssistantMessage) -> None:
        """Run the message's tool calls; their results are appended as they are emitted."""
        if not message.tool_calls:
            return
        self.batch = batch = ToolBatch(
            message,
            self.context.tools,
            self.config,
            self.signal,
            self.emit,
            self.messages,
            self.pool,
            self.append,
        )
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


def _summary_text(message: AssistantMessage) -> AssistantMessage:
    """The summary must be a final, non-empty answer: drop tool calls, never return empty."""
    content = message.content
    if not (content and content.strip()):
        why = f" ({message.error_message})" if message.error_message else ""
        content = f"I stopped because the budget is used up, and no summary could be produced{why}."
    stop = "stop" if message.stop_reason in ("tool_use", "stop") else message.stop_reason
    return message.model_copy(update={"content": content, "tool_calls": (), "stop_reason": stop})


def check_continue(context: AgentContext) -> None:
    if not context.messages:
        raise ValueError("cannot continue: the context has no messages (start with a prompt)")


async def run_agent_loop(
    prompts: Sequence[Message],
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    emit: EventSink,
) -> list[Message]:
    """Run the loop with new prompt messages; returns the messages this run added."""
    run = _LoopRun(context, config, signal or AbortSignal(), stream_fn, emit)
    return await run.run(prompts)


async def run_agent_loop_continue(
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    emit: EventSink,
) -> list[Message]:
    """Continue from the existing transcript without a new prompt.

    The last message must be a user or tool message, unless it is an assistant message and
    messages are queued: then queued steering messages (or else follow-ups) become the
    prompts. Raises ``ValueError`` before any event when there is nothing to continue from.
    """
    check_continue(context)
    tail = context.messages[-1]
    if isinstance(tail, AssistantMessage) and tail.sendable:
        queued = (
            list(await maybe_await(config.get_steering_messages()))
            if config.get_steering_messages
            else []
        )
        if not queued and config.get_follow_up_messages:
            queued = list(await maybe_await(config.get_follow_up_messages()))
        if not queued:
            raise ValueError(
                "cannot continue from an assistant message: nothing is queued "
                "(send a prompt, or steer / follow up first)"
            )
        run = _LoopRun(context, config, signal or AbortSignal(), stream_fn, emit)
        return await run.run(queued, steering_poll=False)
    return await run_agent_loop((), context, config, signal, stream_fn, emit)
