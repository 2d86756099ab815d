"""The options of a ``%%agent`` cell: parsed with IPython's magic_arguments (so ``%%agent?``
and ``--help`` print the same text), checked, and merged with the configured defaults.

Parsing is kept apart from running so the input transformer, the real cell magic and the
front end's queue message all read a cell's first line the same way, and so a bad option
fails before anything is sent to a model.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments

from mibyan_jupyter.jupyter.cell.limits import LIMITS, LimitError, flag_value
from mibyan_jupyter.jupyter.defaults import (
    APPROVE_MODES,
    COMPACT_MODES,
    THINKING_LEVELS,
    TOOL_MODES,
    ApproveMode,
    CompactMode,
    Defaults,
)
from mibyan_jupyter.jupyter.guard import approve_env


class AgentUsageError(UsageError):
    """A bad ``%%agent`` option: one red line saying what is allowed, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]


@dataclass(frozen=True, slots=True)
class CellOptions:
    """A cell's options after defaults: ``None`` limits are unlimited."""

    model: str
    session: str | None
    """``"new"``, ``"last"``, an id or id prefix, or ``None`` (this notebook's current)."""
    system_prompt: str | None
    """``None``: keep the session's own system prompt."""
    tools: str
    approve: ApproveMode
    max_turns: int | None
    max_tokens: int | None
    max_cost: float | None
    thinking: str
    tool_mode: str
    fallback_models: tuple[str, ...]
    after: bool
    """Queue as a follow-up (run after the agent finishes) instead of steering."""
    compact: CompactMode = "auto"
    """When the conversation is compacted (docs/architecture.md, "Context compression")."""
    context_window: int | None = None
    """The cell's or configured window in tokens (``None``: the bundled table's)."""
    variables: bool = True
    """Send the user's variables summary as an ephemeral note with each request."""
    delegate_turns: int | None = None
    """Each delegated child's own turn budget (``None``: 50, core/delegation.py's)."""
    explicit: frozenset[str] = frozenset()
    """The settings the cell's line gave (field names, e.g. ``"model"``): these override
    what a resumed session recorded; the others come from the session when it has them."""


def _describe(name: str) -> str:
    return LIMITS[name].describe()


_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--model", "-m"),
        {
            "help": "model spec, e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
            "ollama:llama3.1, demo, demo-slow (default: c.AgentMagics.model, else the first "
            "provider with a key, else the demo model)"
        },
    ),
    (
        ("--session", "-s"),
        {
            "help": "new | last | ID: which session the cell talks to (default: this "
            "notebook's current session, so successive cells are one conversation)"
        },
    ),
    (("--system",), {"help": "system prompt for the session"}),
    (
        ("--tools", "-t"),
        {
            "help": (
                "tool groups: inspect,python,files,shell,memory,notebook,clarify,delegate"
                " | mcp | mcp:NAME | a plugin's group | all | none (default:"
                " c.AgentMagics.tools; %agent tools lists every group)"
            )
        },
    ),
    (
        ("--approve", "-a"),
        {
            "help": "ask | auto | deny: how tool calls with side effects are approved "
            "(default ask; with no front end the policy denies them)"
        },
    ),
    (("--max-turns",), {"help": "most model calls in this cell: " + _describe("max_turns")}),
    (
        ("--max-tokens",),
        {"help": "most tokens (input + output) in this cell: " + _describe("max_tokens")},
    ),
    (("--max-cost",), {"help": "most this cell may spend: " + _describe("max_cost")}),
    (
        ("--delegate-turns",),
        {
            "help": "each delegated child agent's own turns (default: "
            "c.AgentMagics.delegate_turns, 50): " + _describe("delegate_turns")
        },
    ),
    (("--thinking",), {"help": "reasoning effort: " + " | ".join(THINKING_LEVELS)}),
    (("--tool-mode",), {"help": "parallel | sequential execution of one turn's tool calls"}),
    (
        ("--fallback",),
        {"nargs": "+", "metavar": "MODEL", "help": "models to fail over to, in order"},
    ),
    (("--compact",), {"help": "auto | ask | off: compact the conversation near the window"}),
    (
        ("--context-window",),
        {
            "help": "the model's context window (default: the bundled table): "
            + _describe("context_window")
        },
    ),
    (
        ("--no-variables",),
        {
            "action": "store_true",
            "help": "do not send a summary of your variables with each request",
        },
    ),
    (
        ("--after",),
        {
            "action": "store_true",
            "help": "if the agent is busy, run this prompt after it finishes (follow-up) "
            "instead of steering it",
        },
    ),
)


CELL_FLAGS: tuple[str, ...] = tuple(flags[0] for flags, _ in _OPTIONS)
"""Every option of a ``%%agent`` cell (its long form), as ``%%agent --help`` lists them."""


def agent_cell_signature(line: str, cell: str = "") -> None:
    """Ask the agent: the cell's body is the prompt.

    Example::

        %%agent --tools inspect,python
        What columns does df have, and plot the price by year.
    """


def _with_arguments(function: Callable[..., None]) -> Any:
    """IPython's magic_arguments decorators (untyped), applied as ``@argument`` lines would
    be: the parser, and the help text appended to the docstring that ``%%agent?`` shows."""
    decorated: Any = function
    for flags, options in reversed(_OPTIONS):
        decorated = argument(*flags, **options)(decorated)  # type: ignore[no-untyped-call]
    return magic_arguments(name="%agent")(decorated)  # type: ignore[no-untyped-call]


_SIGNATURE = _with_arguments(agent_cell_signature)


USAGE = str(_SIGNATURE.__doc__)


def _positive(name: str, text: str | None) -> Any:
    """A numeric flag's value, refused unless finite, positive and sensible (the limits
    are :data:`~.limits.LIMITS`, shared with the configured defaults)."""
    try:
        return flag_value(name, text)
    except LimitError as error:
        raise AgentUsageError(str(error)) from None


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise AgentUsageError(f"--{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _explicit(args: Any) -> frozenset[str]:
    """The :class:`CellOptions` fields the line itself set (not the defaults)."""
    given = {
        "model": args.model,
        "system_prompt": args.system,
        "tools": args.tools,
        "thinking": args.thinking,
        "tool_mode": args.tool_mode,
        "max_turns": args.max_turns,
        "max_tokens": args.max_tokens,
        "max_cost": args.max_cost,
        "fallback_models": args.fallback,
        "compact": args.compact,
        "context_window": args.context_window,
        "variables": True if args.no_variables else None,
    }
    return frozenset(name for name, value in given.items() if value is not None)


def parse_cell_line(line: str, defaults: Defaults) -> CellOptions:
    """The options of ``%%agent <line>`` merged with ``defaults``; raises
    :class:`AgentUsageError` (with what is allowed) for anything wrong."""
    try:
        args = _SIGNATURE.parser.parse_args(shlex.split(line))
    except ValueError as error:  # unbalanced quotes
        raise AgentUsageError(f"cannot read the options: {error}") from None
    except UsageError as error:
        raise AgentUsageError(f"{error} (see %%agent? for the options)") from None
    max_turns = _positive("max_turns", args.max_turns) or defaults.max_turns or None
    max_tokens = _positive("max_tokens", args.max_tokens) or defaults.max_tokens or None
    max_cost = _positive("max_cost", args.max_cost) or defaults.max_cost or None
    configured = approve_env().strip().lower() or defaults.approve  # as the kernel started
    approve = _choice("approve", args.approve or configured, APPROVE_MODES)
    session = args.session
    if session is not None and not re.fullmatch(r"new|last|[0-9A-Za-z_-]{2,64}", session):
        raise AgentUsageError(f"--session must be new, last or a session id; got {session!r}")
    return CellOptions(
        model=(args.model or defaults.model).strip(),
        session=session,
        system_prompt=args.system,
        tools=args.tools if args.tools is not None else defaults.tools,
        approve=approve,  # type: ignore[arg-type]
        max_turns=max_turns,
        max_tokens=max_tokens,
        max_cost=max_cost,
        thinking=_choice("thinking", args.thinking or defaults.thinking, THINKING_LEVELS),
        tool_mode=_choice("tool-mode", args.tool_mode or defaults.tool_mode, TOOL_MODES),
        fallback_models=tuple(args.fallback or defaults.fallback_models),
        after=bool(args.after),
        compact=_choice("compact", args.compact or defaults.compact, COMPACT_MODES),  # type: ignore[arg-type]
        context_window=(
            _positive("context_window", args.context_window) or defaults.context_window or None
        ),
        variables=bool(defaults.variables) and not args.no_variables,
        delegate_turns=(
            _positive("delegate_turns", args.delegate_turns) or defaults.delegate_turns or None
        ),
        explicit=_explicit(args),
    )


def wants_help(line: str) -> bool:
    """``%%agent?``, ``%%agent --help`` or ``-h``: the help, not a run. Only a lone ``?``
    asks for help: ``--system 'why?'`` is a run whose system prompt ends in a question."""
    words = line.split()
    return line.strip() in ("?", "??") or "--help" in words or "-h" in words
