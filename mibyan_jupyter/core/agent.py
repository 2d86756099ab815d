"""``Agent``: the stateful wrapper around the loop (pi's ``Agent``).

It owns the transcript, the tools, the model and the two queues, fans events out to
subscribers (the view, the store), and turns ``abort()`` into the loop's signal.

* ``steer(message)`` queues a message that is injected after the current tool batch
  (the model sees it at its next call); ``follow_up(message)`` queues one that runs only
  when the agent would otherwise stop. Each queue drains ``one-at-a-time`` (default) or
  ``all`` at once. Queued messages survive an abort: they wait for the next run.
* ``prompt()`` while a run is active raises :class:`AgentBusyError`: a second concurrent
  run would interleave two transcripts. Queue instead, or ``await wait_for_idle()``.
* A subscriber that raises is logged and skipped; it cannot break the run. When the run
  is cancelled while an async subscriber awaits an event, the other subscribers still get
  that event before the cancellation goes on, so each sees the same, complete grammar
  (the loop then closes what was open; see ``core/_run/grammar.py``). Nothing reaches a
  subscriber after ``AgentEnd``, nor a ``ToolExecutionUpdate`` after its call ended.
* Prompt text (``prompt``, ``steer``, ``follow_up``, ``chat``, a history given to
  ``run_conversation``) is made valid Unicode where it enters (lone surrogates replaced;
  docs/architecture.md, "Decisions").

The Hermes facade (``chat`` / ``run_conversation``) is a pair of methods here; the
history reading and result shaping they use are in :mod:`.conversation`, the sync bridge in
:mod:`.sync_bridge` (neither imports this module).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from ._run.compact import compact_now
from ._run.loop import run_agent_loop, run_agent_loop_continue
from ._run.sanitize import clean_prompts
from .approval import ApprovalGate
from .budget import BudgetLimits
from .compaction import CompactionSettings
from .config import AgentContext, LoopConfig, ToolExecutionMode
from .conversation import conversation_result, final_text, read_history
from .events import (
    AgentEnd,
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from .messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from .notes import NotesFn
from .notices import CompactionNotice
from .prompt import PromptBuilder
from .results import MemoryResults, ResultStore, read_result_tool
from .safe_text import clean_text
from .signal import AbortSignal
from .state import AgentState as AgentState
from .state import MessageQueue, as_user
from .state import QueueMode as QueueMode
from .stream import StreamFn, ThinkingLevel
from .sync_bridge import closing_loop_resources, run_sync
from .tools import Tool, ToolRegistry
from .transcript import check_history

Listener: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]

_log = logging.getLogger(__name__)


class AgentBusyError(RuntimeError):
    """``prompt()`` or ``continue_()`` was called while a run is active."""


class Agent:
    """A conversation with a model and tools. Construct it with a ``stream_fn`` (a provider,
    or a fake model) and a ``model`` name the stream function understands."""

    def __init__(
        self,
        *,
        stream_fn: StreamFn,
        model: str = "demo",
        system_prompt: str = "",
        tools: Sequence[Tool] = (),
        messages: Sequence[Message] = (),
        thinking_level: ThinkingLevel = "off",
        tool_execution: ToolExecutionMode = "parallel",
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        approval: ApprovalGate | None = None,
        budget: BudgetLimits | None = None,
        loop_options: dict[str, Any] | None = None,
        compaction: CompactionSettings | None = None,
        prompt_builder: PromptBuilder | None = None,
        notes: NotesFn | None = None,
        result_limit: int | None = 16_000,
        result_store: ResultStore | None = None,
    ) -> None:
        check_history(messages)
        self.stream_fn = stream_fn
        self.state = AgentState(
            system_prompt=system_prompt,
            model=model,
            thinking_level=thinking_level,
            tools=ToolRegistry(tools),
            messages=list(messages),
        )
        self.tool_execution: ToolExecutionMode = tool_execution
        self.approval = approval
        self.budget = budget if budget is not None else BudgetLimits()
        self.loop_options: dict[str, Any] = dict(loop_options or {})
        """Extra :class:`LoopConfig` fields (hooks, ``max_tokens``, ``tool_timeout``...)."""
        self.compaction = compaction
        self.prompt_builder = prompt_builder
        """When set, each run's system prompt is ``prompt_builder.build(tools)``."""
        if prompt_builder is not None and system_prompt and not prompt_builder.instructions:
            prompt_builder.instructions = system_prompt
        self.notes = notes
        self.result_limit = result_limit
        self.result_store: ResultStore | None = None
        if result_limit is not None:  # spilling on: keep results aside, and page them back
            self.result_store = result_store if result_store is not None else MemoryResults()
            if result_store is not None and "read_result" not in self.state.tools:
                self.state.tools.add(read_result_tool(result_store))
        self._steering = MessageQueue(steering_mode)
        self._follow_up = MessageQueue(follow_up_mode)
        self._listeners: list[Listener] = []
        self._ended = False  # this run's AgentEnd went out: nothing may follow it
        self._signal: AbortSignal | None = None
        self._idle: asyncio.Future[None] | None = None

    # -- subscription -----------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (sync or async) with every event; returns an unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def _dispatch(self, event: AgentEvent) -> None:
        if not self._admit(event):
            return
        self._track(event)
        cancelled: asyncio.CancelledError | None = None
        for listener in tuple(self._listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError as error:
                # The loop counts this event as emitted (core/_run/grammar.py) and will
                # close what it opened: the subscribers after this one must see it too.
                cancelled = error
            except Exception:
                _log.exception("an agent event listener failed on %s", event.type)
        if cancelled is not None:
            raise cancelled

    def _admit(self, event: AgentEvent) -> bool:
        """Whether ``event`` may reach the subscribers: never after ``AgentEnd``, and a
        tool update only while its call runs (a tool's thread may report late)."""
        if self._ended:
            _log.debug("dropped %s after AgentEnd", event.type)
            return False
        if (
            isinstance(event, ToolExecutionUpdate)
            and event.call_id not in self.state.pending_tool_calls
        ):
            _log.debug("dropped an update of call %s, which is not running", event.call_id)
            return False
        return True

    def _track(self, event: AgentEvent) -> None:
        state = self.state
        if isinstance(event, MessageUpdate):
            state.stream_update(event)
        elif isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            state.streaming_message = event.message
        elif isinstance(event, MessageEnd):
            # The loop has already appended the message to state.messages (it works on
            # that list in place), so a run cut short never leaves the two out of step.
            state.streaming_message = None
            if isinstance(event.message, AssistantMessage) and event.message.error_message:
                state.error = event.message.error_message
        elif isinstance(event, ToolExecutionStart):
            state.pending_tool_calls.add(event.call_id)
        elif isinstance(event, ToolExecutionEnd):
            state.pending_tool_calls.discard(event.call_id)
        elif isinstance(event, AgentEnd):
            state.last_end_reason = event.reason
            self._ended = True

    # -- queues -----------------------------------------------------------------------

    @property
    def steering_mode(self) -> QueueMode:
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.mode = mode

    @property
    def follow_up_mode(self) -> QueueMode:
        return self._follow_up.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up.mode = mode

    def steer(self, message: str | Message) -> None:
        """Queue a message for the model's next call (after the current tool batch)."""
        self._steering.items.append(as_user(message))

    def follow_up(self, message: str | Message) -> None:
        """Queue a message to run when the agent would otherwise stop."""
        self._follow_up.items.append(as_user(message))

    @property
    def queued(self) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
        """(steering, follow-up) messages waiting."""
        return tuple(self._steering.items), tuple(self._follow_up.items)

    def clear_queues(self) -> None:
        self._steering.items.clear()
        self._follow_up.items.clear()

    # -- runs -------------------------------------------------------------------------

    def abort(self, reason: str = "aborted by the user") -> None:
        """Stop the active run (thread-safe); a no-op when idle."""
        if self._signal is not None:
            self._signal.abort(reason)

    async def wait_for_idle(self) -> None:
        if self._idle is not None:
            await asyncio.shield(self._idle)

    async def prompt(self, message: str | Message | Sequence[Message]) -> list[Message]:
        """Run the loop with a new prompt; returns the messages the run added."""
        if isinstance(message, str | SystemMessage | UserMessage | AssistantMessage | ToolMessage):
            prompts = [as_user(message)]
        else:
            prompts = [as_user(m) for m in message]
        return await self._run(prompts)

    async def continue_(self) -> list[Message]:
        """Continue from the transcript: after a tool result or a user message, after a
        failed or aborted reply (never sent, so this retries), or, after a finished
        assistant reply, with queued messages. Raises ``ValueError`` if there is nothing."""
        return await self._run(None)

    def _config(self) -> LoopConfig:
        return LoopConfig(
            model=self.state.model,
            thinking_level=self.state.thinking_level,
            tool_execution=self.tool_execution,
            get_steering_messages=self._steering.drain,
            get_follow_up_messages=self._follow_up.drain,
            approval=self.approval,
            budget=self.budget,
            compaction=self.compaction,
            notes=self.notes,
            result_limit=self.result_limit,
            result_store=self.result_store,
            **self.loop_options,
        )

    async def _run(self, prompts: list[Message] | None) -> list[Message]:
        if self.state.is_running:
            raise AgentBusyError(
                "the agent is already running: queue the message with steer() or follow_up(), "
                "or await wait_for_idle() first"
            )
        state = self.state
        if self.prompt_builder is not None:  # one string while no layer changes
            state.system_prompt = self.prompt_builder.build(state.tools.values())
        context = AgentContext(state.system_prompt, state.messages, state.tools)
        config = self._config()
        self._signal = AbortSignal()
        self._idle = asyncio.get_running_loop().create_future()
        state.is_running = True
        self._ended = False
        state.error = None
        state.last_end_reason = None  # this run's AgentEnd is the only one that counts
        try:
            if prompts is None:
                return await run_agent_loop_continue(
                    context, config, self._signal, self.stream_fn, self._dispatch
                )
            return await run_agent_loop(
                prompts, context, config, self._signal, self.stream_fn, self._dispatch
            )
        finally:
            state.is_running = False
            state.streaming_message = None
            state.pending_tool_calls.clear()
            self._signal = None
            if not self._idle.done():
                self._idle.set_result(None)
            self._idle = None

    async def compact(self) -> CompactionNotice | None:
        """Compact the transcript now (``%agent compact``); ``None`` when there was
        nothing to summarise or the summary failed. Raises :class:`AgentBusyError` while
        a run is active (the run compacts by itself when due)."""
        if self.state.is_running:
            raise AgentBusyError("the agent is running: it compacts by itself when due")
        state = self.state
        if self.prompt_builder is not None:
            state.system_prompt = self.prompt_builder.build(state.tools.values())
        context = AgentContext(state.system_prompt, state.messages, state.tools)
        self._signal = AbortSignal()
        state.is_running, ended, self._ended = True, self._ended, False
        try:
            return await compact_now(
                context, self._config(), self._signal, self.stream_fn, self._dispatch
            )
        finally:
            state.is_running, self._ended, self._signal = False, ended, None

    # -- the Hermes facade -------------------------------------------------------------

    async def achat(self, message: str) -> str:
        """Send ``message``; returns the final answer's text."""
        return final_text(await self.prompt(message))

    def chat(self, message: str) -> str:
        """Sync :meth:`achat`, usable from a script or from inside a running loop."""
        return run_sync(closing_loop_resources(self.stream_fn, self.achat(message)))

    async def arun_conversation(
        self,
        user_message: str,
        system_message: str | None = None,
        conversation_history: Sequence[Message | dict[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Hermes' ``run_conversation``: replaces the transcript with
        ``conversation_history`` (OpenAI chat dicts or messages; a leading system message
        sets the system prompt) when given, runs ``user_message``, and returns
        ``{"messages", "metadata", "usage"}`` with messages as OpenAI chat dicts (plus our
        extras)."""
        task_id = task_id or uuid.uuid4().hex
        if conversation_history is not None:
            system_prompt, history = read_history(conversation_history)
            if system_prompt is not None:
                system_message = system_prompt if system_message is None else system_message
            self.state.messages = clean_prompts(history)
        if system_message is not None:
            self.state.system_prompt = clean_text(system_message)
            if self.prompt_builder is not None:  # the builder's first layer (core/prompt.py)
                self.prompt_builder.instructions = self.state.system_prompt
        added = await self.prompt(user_message)
        return conversation_result(self.state, added, task_id)

    def run_conversation(
        self,
        user_message: str,
        system_message: str | None = None,
        conversation_history: Sequence[Message | dict[str, Any]] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Hermes' ``run_conversation`` -> ``{"messages", "metadata", "usage"}`` (sync)."""
        return run_sync(
            closing_loop_resources(
                self.stream_fn,
                self.arun_conversation(user_message, system_message, conversation_history, task_id),
            )
        )
