"""The agent loop: pi's ``agentLoop`` / ``agentLoopContinue``, in Python.

``run_agent_loop(prompts, context, config, signal, stream_fn, emit)`` adds the prompts,
then repeats turns: (steering messages) -> model call -> tool batch -> TurnEnd, until the
model stops asking for tools and no steering or follow-up message is queued. The sequence,
as in pi's diagram:

1. AgentStart, TurnStart, the prompts' MessageStart/End; an initial steering poll.
2. Each turn: ``prepare_next_turn`` (from the second turn on), a steering poll if nothing is
   pending, TurnStart; pending messages are added; ``transform_context`` then
   ``convert_to_llm`` (or the incremental model view), the alternation check; the budget
   gate reserves the call's worst case (when it cannot: ``on_budget_exhausted`` may raise
   the limit, else one summary call without tools, then AgentEnd ``budget_exhausted``);
   the model call; an ``error`` / ``aborted`` reply ends the run.
3. Tool calls run as a batch (all failed at once on a ``length`` stop); TurnEnd;
   ``should_stop_after_turn``; steering is polled only after the whole batch.
4. When the agent would stop, follow-ups are polled; if there are some, the loop goes on.
5. AgentEnd, exactly once, whatever happened.

Work per turn does not depend on the history's length: the model view is kept
incrementally and handed to the model without copying.

Cancellation: ``signal.abort()`` interrupts the model stream or tool batch at once (see
:mod:`mibyan_jupyter.core.signal`). Cancelling the task that runs the loop does the same,
then the loop re-raises ``CancelledError`` after AgentEnd so the canceller sees it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mibyan_jupyter.core.config import AgentContext, LoopConfig
from mibyan_jupyter.core.messages import AssistantMessage, Message
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import StreamFn

from .turns import EventSink, LoopRun
from .waiting import maybe_await

__all__ = ["EventSink", "check_continue", "run_agent_loop", "run_agent_loop_continue"]


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
    run = LoopRun(context, config, signal or AbortSignal(), stream_fn, emit)
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
        run = LoopRun(context, config, signal or AbortSignal(), stream_fn, emit)
        return await run.run(queued, steering_poll=False)
    return await run_agent_loop((), context, config, signal, stream_fn, emit)
