"""Delegation: a ``delegate_task`` tool that runs a child :class:`Agent` on a sub-task.

The reference system (Hermes' delegate tool) is the model: a child gets a fresh
conversation (the goal as its prompt, the parent's context in its instructions), its own
iteration budget (50 by default, independent of the parent's turns) and a restricted set of
tools, and only its final answer comes back as the tool result. What is ours:

* **Money is shared, turns are not.** The child's gate is ``gate.child(...)`` of the
  parent's one gate (core/budget_gate.py): every reservation a child makes is also held by
  the parent, so parallel children together never spend more than the parent has left, and
  what they use lands in the parent's totals (its budget bars include them).
* **A child can never widen its permissions.** Its tools are a subset of the tools the
  parent was given; a name outside them refuses the whole call (never added). Never given
  to a child (:data:`NOT_FOR_CHILDREN`): ``delegate_task`` (no recursion), ``clarify``
  (a child cannot ask the user; it reports open questions in its answer), the memory writes
  (shared files a sub-task must not change behind the parent), and the parent's own
  ``read_result`` (the child has its own result store).
* **Approvals**: "always" rules carry over, the parent's "this session" approvals do not
  (:func:`child_approval_gate`).
* **Stop reaches every child at once**: the parent's abort signal aborts each child, and the
  tool returns the child's partial work as "stopped" (core/_run/child_run.py).

The child's tool calls see its id as their task id (``ToolContext.task_id``,
``core.tools.current_task_id()``), through a context variable set for the child's run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ._run.child_run import child_result, refused_result, run_child, start_failed
from .agent import Agent
from .approval import ApprovalGate, Approver
from .budget import CHILD_MAX_TURNS, BudgetLimits
from .budget_gate import BudgetGate
from .compaction import CompactionSettings
from .tools import Tool, ToolContext, ToolResult, tool

__all__ = [
    "CHILD_MAX_TURNS",
    "CHILD_SYSTEM_PROMPT",
    "DELEGATE_TOOL",
    "NOT_FOR_CHILDREN",
    "ChildRun",
    "child_approval_gate",
    "delegate_tool",
]

DELEGATE_TOOL = "delegate_task"
NOT_FOR_CHILDREN: frozenset[str] = frozenset(
    {DELEGATE_TOOL, "clarify", "memory_add", "memory_replace", "memory_remove", "read_result"}
)
CHILD_SYSTEM_PROMPT = (
    "You are a focused sub-agent working on one task delegated to you by another agent. "
    "Complete it with the tools you are given; you cannot ask the user questions. When you "
    "are done, answer with a clear, concise summary: what you did, what you found, what you "
    "changed (variables, files), and any problems or open questions. Your answer is returned "
    "to the agent that delegated the task; it sees nothing else of your work."
)
STOP_GRACE_S = 5.0
MAX_PARALLEL_CHILDREN = 3
"""Children of one delegate tool that run at once (the reference system's limit); more
calls in one message wait for a free slot instead of being refused."""
"""How long a stopped child may take to close its run before its task is cancelled."""

INHERITED_OPTIONS = (
    "prices",
    "max_tokens",
    "tool_timeout",
    "tool_threads",
    "options",
    "summary_max_tokens",
    "before_tool_call",
    "after_tool_call",
)
"""The parent's loop options a child runs with: pricing and limits, and the hooks that
guard tool calls (a blocking hook is a permission too). Not the budget question (a child
sums up at its limit), nor the hooks that shape the parent's own transcript and queues."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChildRun:
    """One delegated child, handed to ``child_approval`` and ``on_child`` before it starts."""

    child_id: str
    """``child-<n>``, counted per delegate tool; also the task id its tool calls see."""
    goal: str
    context: str
    tools: tuple[str, ...]
    """The names of the tools it got."""
    agent: Agent
    """The child agent: subscribe to its events (a nested card, a child session)."""
    gate: BudgetGate
    """The child's own gate (``gate.child(...)`` of the parent's); its tracker is the
    child's usage, its parent's tracker includes it."""
    parent_call_id: str
    """The parent's ``delegate_task`` tool call."""
    parent_task_id: str | None = None
    """The task the delegate call ran under (``None``: the top-level agent)."""


def child_approval_gate(
    parent: ApprovalGate | None, *, approver: Approver | None = None
) -> ApprovalGate | None:
    """The approval gate of a child: the parent's policy with the same rules, defaults and
    "always" decisions (shared, so an "always" click in a child is saved as any), but its
    own, empty "this session" memory: what the user approved for the parent's session was
    approved for that agent's work, not for a sub-agent's. Same approver (or ``approver``)
    and timeout; ``None`` when the parent asks nothing."""
    if parent is None:
        return None
    policy = replace(parent.policy, session={})
    return ApprovalGate(
        policy=policy,
        approver=approver if approver is not None else parent.approver,
        timeout=parent.timeout,
    )


def delegate_tool(
    parent: Agent,
    *,
    tools: Sequence[Tool],
    gate: BudgetGate,
    child_approval: Callable[[ChildRun], ApprovalGate | None] | None = None,
    on_child: Callable[[ChildRun], Callable[[], None] | None] | None = None,
    max_turns: int = CHILD_MAX_TURNS,
    system_prompt: str = CHILD_SYSTEM_PROMPT,
    max_parallel: int = MAX_PARALLEL_CHILDREN,
) -> Tool:
    """The ``delegate_task`` tool of ``parent``. ``tools``: what a child may be given (the
    parent's own; :data:`NOT_FOR_CHILDREN` are dropped). ``gate``: the parent's one budget
    gate, the one in ``parent.loop_options["budget_gate"]``. ``child_approval`` builds a
    child's approval gate (default: :func:`child_approval_gate` of the parent's, read at
    call time). ``on_child`` is called before a child starts and may return a cleanup,
    called once it ended; if it raises, no child runs. ``max_turns``: each child's own
    turn budget; ``max_parallel``: children running at once (the others wait). The parent's model, stream function, thinking level, tool mode and
    compaction are read when the tool is called."""
    if max_turns < 1 or max_parallel < 1:
        raise ValueError(
            f"max_turns and max_parallel must be at least 1: {max_turns}, {max_parallel}"
        )
    delegation = _Delegation(
        parent, tools, gate, child_approval, on_child, max_turns, system_prompt
    )
    delegation.slots = asyncio.Semaphore(max_parallel)
    return delegation.tool


class _Delegation:
    """The delegate tool's state: the parent, what a child may get, the child counter."""

    def __init__(
        self,
        parent: Agent,
        tools: Sequence[Tool],
        gate: BudgetGate,
        child_approval: Callable[[ChildRun], ApprovalGate | None] | None,
        on_child: Callable[[ChildRun], Callable[[], None] | None] | None,
        max_turns: int,
        system_prompt: str,
    ) -> None:
        self.parent, self.gate, self.max_turns = parent, gate, max_turns
        self.child_approval, self.on_child, self.system_prompt = (
            child_approval,
            on_child,
            system_prompt,
        )
        self.allowed: dict[str, Tool] = {}
        for item in tools:
            if item.name not in NOT_FOR_CHILDREN:
                self.allowed.setdefault(item.name, item)
        self.count = 0
        self.slots = asyncio.Semaphore(MAX_PARALLEL_CHILDREN)
        self.tool = self._build()

    def _build(self) -> Tool:
        names = ", ".join(self.allowed) or "(none)"

        async def delegate_task(
            goal: str,
            context: str = "",
            tools: list[str] | None = None,
            call: ToolContext | None = None,
        ) -> ToolResult:
            """Hand a self-contained sub-task to a sub-agent and get its final answer.

            The sub-agent starts with no memory of this conversation: put everything it
            needs (names of variables and files, what was tried, constraints) in the goal
            and the context. It has its own turn budget, shares your cost budget, and can
            use only the tools you give it. Several calls in one message run in parallel.

            Args:
                goal: what the sub-agent should accomplish, specific and self-contained.
                context: background it needs (facts, names, constraints); may be empty.
                tools: names of your tools it may use; omit for all it may have.
            """
            assert call is not None  # the loop always passes it
            return await self.run(goal, context, tools, call)

        made = tool(name=DELEGATE_TOOL, side_effects=False)(delegate_task)
        made.description = (
            f"{made.description} Tools a sub-agent may have: {names}. It never gets "
            "delegate_task, clarify or the memory writes."
        )
        return made

    def choose(self, requested: list[str] | None) -> tuple[str, ...] | ToolResult:
        """The child's tool names, or the refusal of a call that asked for others."""
        if requested is None:
            return tuple(self.allowed)
        names = tuple(dict.fromkeys(requested))
        wrong = [n for n in names if n not in self.allowed]
        if wrong:
            return refused_result(wrong, NOT_FOR_CHILDREN, tuple(self.allowed))
        return names

    async def run(
        self, goal: str, context: str, requested: list[str] | None, call: ToolContext
    ) -> ToolResult:
        names = self.choose(requested)
        if isinstance(names, ToolResult):
            return names
        if not goal.strip():
            return start_failed(None, names, "delegate_task needs a goal: say what to do.")
        self.count += 1
        child_id = f"child-{self.count}"
        child_gate = self.gate.child(BudgetLimits(max_turns=self.max_turns))
        child = ChildRun(
            child_id=child_id,
            goal=goal,
            context=context,
            tools=names,
            agent=self.child_agent(names, context, child_gate),
            gate=child_gate,
            parent_call_id=call.call_id,
            parent_task_id=call.task_id,
        )
        try:
            if self.child_approval is not None:
                child.agent.approval = self.child_approval(child)
            else:
                child.agent.approval = child_approval_gate(self.parent.approval)
            cleanup = self.on_child(child) if self.on_child is not None else None
        except Exception as error:
            _log.exception("the delegated child %s could not be set up", child_id)
            return start_failed(child_id, names, error)
        try:
            async with self.slots:  # at most max_parallel children at once
                ending = await run_child(child.agent, goal, call.signal, child_id, STOP_GRACE_S)
        finally:
            if cleanup is not None:
                try:
                    cleanup()
                except Exception:
                    _log.exception("the cleanup of the delegated child %s failed", child_id)
        return child_result(child_id, names, child.agent, child_gate, ending)

    def child_agent(self, names: tuple[str, ...], context: str, gate: BudgetGate) -> Agent:
        """A fresh agent on the parent's model, with ``names`` and its own gate."""
        parent = self.parent
        options = {k: parent.loop_options[k] for k in INHERITED_OPTIONS if k in parent.loop_options}
        options["budget_gate"] = gate
        prompt = self.system_prompt
        if context.strip():
            prompt = f"{prompt}\n\nContext from the agent that delegated the task:\n{context}"
        return Agent(
            stream_fn=parent.stream_fn,
            model=parent.state.model,
            system_prompt=prompt,
            tools=[self.allowed[n] for n in names],
            thinking_level=parent.state.thinking_level,
            tool_execution=parent.tool_execution,
            budget=gate.limits,
            loop_options=options,
            compaction=_child_compaction(parent.compaction),
            result_limit=parent.result_limit,
        )


def _child_compaction(settings: CompactionSettings | None) -> CompactionSettings | None:
    """The parent's compaction without the parts that reach the user or the memory files:
    a child never asks before compacting and never flushes memory."""
    if settings is None:
        return None
    mode: Literal["auto", "off"] = "off" if settings.mode == "off" else "auto"
    return replace(settings, mode=mode, confirm=None, before_compaction=None)
