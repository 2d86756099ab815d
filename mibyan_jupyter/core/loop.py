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
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from .budget import BudgetLimits, BudgetTracker
from .config import AgentContext, LoopConfig, TurnContext, TurnUpdate
from .events import AgentEnd, AgentEvent, AgentStart, MessageEnd, MessageStart, TurnEnd, TurnStart
from .messages import AssistantMessage, Message, ToolMessage, UserMessage
from .model_call import ModelCall
from .signal import AbortSignal
from .stream import ModelRequest, StreamFn
from .tool_batch import CANCELLED, ToolBatch
from .transcript import ModelView, TranscriptError, validate_transcript

EventSink = Callable[[AgentEvent], Awaitable[None] | None]
EndReason = Literal["completed", "aborted", "error", "stopped_by_hook", "budget_exhausted"]
T = TypeVar("T")

_UNLIMITED = BudgetLimits(max_turns=None)


async def _maybe(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


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
        self.messages: list[Message] = list(context.messages)
        self.new_messages: list[Message] = []
        self.view: ModelView | None = None
        self.view_error: TranscriptError | None = None
        self.budget = BudgetTracker(config.budget or _UNLIMITED)
        self.override: TurnUpdate | None = None
        self.cancelled_externally = False
        self.turn_open = False
        self.turn_message: AssistantMessage | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- plumbing ---------------------------------------------------------------------

    async def emit(self, event: AgentEvent) -> None:
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
        index = len(self.messages)
        self.messages.append(message)
        self.new_messages.append(message)
        if self.view is not None and self.view_error is None:
            try:
                self.view.append(message, index)
            except TranscriptError as error:
                self.view_error = error

    async def add_user_messages(self, messages: Sequence[Message]) -> None:
        for message in messages:
            await self.emit(MessageStart(message=message))
            await self.emit(MessageEnd(message=message))
            self.append(message)

    async def poll(self, hook: Callable[[], Any] | None) -> list[Message]:
        if hook is None:
            return []
        return list(await _maybe(hook()))

    async def start_turn(self) -> None:
        self.turn_open = True
        self.turn_message = None
        await self.emit(TurnStart())

    async def end_turn(
        self, message: AssistantMessage | None, results: Sequence[ToolMessage] = ()
    ) -> None:
        self.turn_open = False
        await self.emit(TurnEnd(message=message, tool_results=tuple(results)))

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
        await self.emit(AgentStart())
        try:
            await self.start_turn()
            await self.add_user_messages(prompts)
            steering = self.config.get_steering_messages if steering_poll else None
            return await self.turns(await self.poll(steering))
        except asyncio.CancelledError:
            if not self.cancelled_externally:  # cancelled outside a model call or tool batch
                self.cancelled_externally = True
                self.signal._absorb_cancel()
                await self.close_after_failure("aborted")
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
                    self.override = await _maybe(hook(last_turn)) if hook else None
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
                results = await self.run_tools(message)
                more_tool_calls = bool(message.tool_calls)
                await self.end_turn(message, results)
                if self.signal.aborted:
                    return await self.end("aborted")
                last_turn = TurnContext(message, results, self.messages, self.new_messages)
                stop = self.config.should_stop_after_turn
                if stop is not None and await _maybe(stop(last_turn)):
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
            await self.emit(MessageStart(message=failed))
            await self.emit(MessageEnd(message=failed))
            self.turn_message = failed
            self.append(failed)
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
        message = await call.run(request, finalize=_summary_text if summary else None)
        self.cancelled_externally |= call.cancelled_externally
        self.turn_message = message
        self.append(message)
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
            messages = await _maybe(config.transform_context(messages, self.signal))
        if config.convert_to_llm is not None:
            converted = await _maybe(config.convert_to_llm(messages))
            validate_transcript(converted, ready_for_model=True)
            return converted
        view = ModelView(messages)
        view.check_ready()
        return view.messages

    async def run_tools(self, message: AssistantMessage) -> list[ToolMessage]:
        if not message.tool_calls:
            return []
        batch = ToolBatch(
            message,
            self.context.tools,
            self.config,
            self.signal,
            self.emit,
            self.messages,
            self.pool,
        )
        if message.stop_reason == "length":
            results = await batch.fail_truncated()
        else:
            results = await batch.run()
        self.cancelled_externally |= batch.cancelled_externally
        for result in results:
            self.append(result)
        return results

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
        return await self.end("budget_exhausted")

    async def close_after_failure(self, reason: EndReason) -> None:
        """An exception escaped (a hook or the event sink failed, or the task was cancelled
        between phases): keep the transcript sendable and close the grammar, then let the
        exception go on."""
        try:
            last = self.turn_message
            if last is not None and last.tool_calls:
                answered = {m.tool_call_id for m in self.new_messages if isinstance(m, ToolMessage)}
                for call in last.tool_calls:
                    if call.id not in answered:
                        result = ToolMessage(
                            tool_call_id=call.id,
                            name=call.function.name,
                            content=CANCELLED,
                            is_error=True,
                        )
                        await self.emit(MessageStart(message=result))
                        await self.emit(MessageEnd(message=result))
                        self.append(result)
            if self.turn_open:
                await self.end_turn(last)
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            await self.emit(AgentEnd(messages=tuple(self.new_messages), reason=reason))
        except Exception:  # the sink itself is broken; nothing more can be reported
            pass


def _summary_text(message: AssistantMessage) -> AssistantMessage:
    """The summary must be a final, non-empty answer: drop tool calls, never return empty."""
    content = message.content
    if not (content and content.strip()):
        why = f" ({message.error_message})" if message.error_message else ""
        content = f"I stopped because the budget is used up, and no summary could be produced{why}."
    return message.model_copy(update={"content": content, "tool_calls": ()})


def _check_continue(context: AgentContext) -> None:
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
    _check_continue(context)
    if isinstance(context.messages[-1], AssistantMessage):
        queued = (
            list(await _maybe(config.get_steering_messages()))
            if config.get_steering_messages
            else []
        )
        if not queued and config.get_follow_up_messages:
            queued = list(await _maybe(config.get_follow_up_messages()))
        if not queued:
            raise ValueError(
                "cannot continue from an assistant message: nothing is queued "
                "(send a prompt, or steer / follow up first)"
            )
        run = _LoopRun(context, config, signal or AbortSignal(), stream_fn, emit)
        return await run.run(queued, steering_poll=False)
    return await run_agent_loop((), context, config, signal, stream_fn, emit)


class AgentEventStream:
    """Events of a loop running in a background task, as an async iterator.

    ``result()`` returns the new messages. Leaving the iteration early does not stop the
    run; ``aclose()`` does (it cancels the task).
    """

    def __init__(self, start: Callable[[EventSink], Awaitable[list[Message]]]) -> None:
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._drive(start))

    async def _drive(self, start: Callable[[EventSink], Awaitable[list[Message]]]) -> list[Message]:
        try:
            return await start(self._queue.put_nowait)
        finally:
            self._queue.put_nowait(None)

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
    _check_continue(context)
    return AgentEventStream(
        lambda emit: run_agent_loop_continue(context, config, signal, stream_fn, emit)
    )
