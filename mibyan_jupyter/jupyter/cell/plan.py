"""One cell's plan: everything its options decide, settled once before anything runs.

Why a frozen plan: a cell's model, tools, budget and approval mode used to be worked out in
several places (the model spec resolved twice, the agent built with some settings and
re-configured with others). Now :func:`plan_cell` decides them once, and
:func:`configure_agent` is the one function that puts them on the session's agent, new,
resumed or kept alike; the view's header is drawn from the same :class:`ChosenModel`, so
the model the header names is the model that answers (docs/architecture.md, "One
`%%agent` cell, end to end").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.core.budget_gate import BudgetGate
from mibyan_jupyter.core.messages import Usage
from mibyan_jupyter.core.tools import ToolRegistry
from mibyan_jupyter.jupyter.cell.admission import admit, capped_budget_hook, tell_reviewable
from mibyan_jupyter.jupyter.cell.budget_ask import budget_options, cell_prices
from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
from mibyan_jupyter.jupyter.cell.context import (
    compaction_settings,
    kernel_name,
    notebook_context,
    session_builder,
    variables_notes,
)
from mibyan_jupyter.jupyter.cell.models import choose_cell_model, choose_model, stream_function
from mibyan_jupyter.jupyter.cell.options import AgentUsageError, CellOptions, parse_cell_line
from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
from mibyan_jupyter.jupyter.cell.tool_sources import cell_tools
from mibyan_jupyter.jupyter.kernel_tools import UnknownToolGroupError, parse_groups
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.store.session_queries import SessionSettings

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalGate
    from mibyan_jupyter.jupyter.defaults import Defaults
    from mibyan_jupyter.jupyter.state import SessionHandle
    from mibyan_jupyter.jupyter.view import AgentView

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant working inside a Jupyter notebook, in the user's running "
    "Python kernel. Use the tools you are given to look at the user's variables, run Python "
    "in their namespace and read files next to the notebook; say what you did. Answer in "
    "concise Markdown."
)


def plan_cell(
    prompt: str,
    line: str,
    defaults: Defaults,
    *,
    headless: bool,
    session: SessionSettings | None = None,
) -> CellPlan:
    """The plan of ``%%agent <line>`` with ``prompt``; raises :class:`AgentUsageError`
    for a bad option, an empty prompt, an unknown model or tool group, a missing key.
    ``session``: the recorded settings of the session the cell continues (``None``: a
    new session), which win over the configured defaults but not over the line."""
    options = parse_cell_line(line, defaults)
    return plan_from_options(prompt, options, defaults, headless=headless, session=session)


def with_session_settings(options: CellOptions, session: SessionSettings) -> CellOptions:
    """``options`` where every setting the line did not give is the session's recorded
    one (when it recorded it): a resumed session continues as it was."""
    recorded = {
        key: getattr(session, key)
        for key in ("tools", "thinking", "tool_mode", "max_turns", "max_tokens", "max_cost")
        if key not in options.explicit and getattr(session, key) is not None
    }
    return replace(options, **recorded) if recorded else options


def plan_from_options(
    prompt: str,
    options: CellOptions,
    defaults: Defaults,
    *,
    headless: bool,
    session: SessionSettings | None = None,
) -> CellPlan:
    """:func:`plan_cell` of options already parsed (the model resolved once, here)."""
    if not prompt.strip():
        raise AgentUsageError("the cell has no prompt: write it on the lines below %%agent")
    if session is not None:
        options = with_session_settings(options, session)
    chosen = choose_cell_model(options, session.model if session is not None else None)
    if options.context_window is not None:  # the cell's or configured window wins the table's
        chosen = replace(chosen, context_window=options.context_window)
    stream_fn = stream_function(chosen, options.fallback_models)
    try:
        groups = parse_groups(options.tools, plugins=_plugin_names)
    except UnknownToolGroupError as error:
        raise AgentUsageError(str(error)) from None
    budget = BudgetLimits(
        max_turns=options.max_turns, max_total_tokens=options.max_tokens, max_cost=options.max_cost
    )
    fallbacks = tuple(choose_model(name) for name in options.fallback_models)
    plan = CellPlan(
        options=options,
        model=chosen,
        stream_fn=stream_fn,
        groups=groups,
        budget=budget,
        gate=BudgetGate(budget),
        prices=cell_prices(chosen, fallbacks),
        new_session_prompt=(
            options.system_prompt or defaults.system_prompt or DEFAULT_SYSTEM_PROMPT
        ),
        # A kernel that cannot deliver clicks during a run is headless from the start
        # (docs/architecture.md, "Running inside the kernel"; jupyter/entry/capabilities.py).
        headless=headless or kernel_state().kernel_limits is not None,
        headless_wait=float(defaults.headless_wait),
        pins=(session.pins or ()) if session is not None else (),
    )
    return admit(plan)  # the admin policy wins over every setting ("Admin policy")


def _plugin_names() -> list[str]:
    """The installed plugins' groups: entry points are read only when a cell names a group
    that is not built in (docs/architecture.md, "Tools from outside")."""
    from mibyan_jupyter.jupyter.plugins import group_names

    return list(group_names())


def session_config(plan: CellPlan) -> dict[str, Any]:
    """The settings a new session records, so a resume continues with them."""
    options = plan.options
    return SessionSettings(
        system_prompt=plan.new_session_prompt,
        tools=options.tools,
        thinking=options.thinking,
        tool_mode=options.tool_mode,
        max_turns=options.max_turns,
        max_tokens=options.max_tokens,
        max_cost=options.max_cost,
    ).config()


def configure_agent(
    agent: Agent,
    plan: CellPlan,
    approval: ApprovalGate,
    *,
    view: AgentView | None = None,
    notebook: str | None = None,
    results: Any = None,
    on_usage: Callable[[Usage], None] | None = None,
    handle: SessionHandle | None = None,
) -> None:
    """This cell's settings on the session's agent (the next cell may change them): the
    one place the model, stream function, tools, budget, approval, prompt builder and
    compaction are set. ``view`` asks before compacting (``--compact ask``); ``results``
    keeps the spilled tool results (``None``: the agent's own, in memory); ``on_usage``
    bills the memory flush's model call (the store writer's ledger); ``handle``: the session
    being run (its writer keeps delegated children's transcripts)."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    namespace: dict[str, Any] = shell.user_ns if shell is not None else {}
    tools = cell_tools(
        ToolSetting(
            plan=plan,
            agent=agent,
            approval=approval,
            namespace=namespace,
            root=Path.cwd(),
            shell=shell,
            view=view,
            handle=handle,
            on_interrupt=lambda: agent.abort("interrupted (Kernel > Interrupt)"),
        )
    )
    options = plan.options
    agent.stream_fn = plan.stream_fn
    agent.state.model = plan.model.name
    agent.state.tools = ToolRegistry(tools)
    agent.state.thinking_level = options.thinking  # type: ignore[assignment]
    agent.tool_execution = options.tool_mode  # type: ignore[assignment]
    if options.system_prompt is not None:
        agent.state.system_prompt = options.system_prompt
    agent.budget = plan.budget
    agent.loop_options.update(budget_options(plan, view))  # one gate ("Budgets")
    hook = agent.loop_options.get("on_budget_exhausted")  # an admin cap is never raised
    agent.loop_options["on_budget_exhausted"] = capped_budget_hook(plan, hook)
    tell_reviewable(view, handle.session_id if handle is not None else None)
    agent.approval = approval
    _lasting(agent, plan, view, notebook, shell, namespace, on_usage)
    if results is not None:
        agent.result_store = results


def _lasting(
    agent: Agent,
    plan: CellPlan,
    view: AgentView | None,
    notebook: str | None,
    shell: Any,
    namespace: dict[str, Any],
    on_usage: Callable[[Usage], None] | None = None,
) -> None:
    """The session's prompt builder, compaction and notes (docs/architecture.md, "Prompt
    builder", "Context compression"): the builder is kept on the agent across cells."""
    from mibyan_jupyter.memory import Memory

    memory = Memory.for_folder(Path.cwd())
    current = agent.prompt_builder
    # The instructions are the session's own prompt, never a prompt built before.
    instructions = plan.options.system_prompt or (
        current.instructions if current is not None else agent.state.system_prompt
    )
    context = notebook_context(notebook, kernel_name(shell), Path.cwd())
    agent.prompt_builder = session_builder(
        current,
        instructions,
        context,
        memory.snapshot(),
        plan.pins,
    )
    if view is not None:
        flush = memory if "memory" in plan.groups else None
        agent.compaction = compaction_settings(plan, view, flush, on_usage)
    agent.notes = variables_notes(namespace, shell) if plan.options.variables else None
