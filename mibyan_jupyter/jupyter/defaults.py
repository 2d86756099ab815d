"""The settings every ``%%agent`` cell starts from, defined once.

Why here, at the bottom of the Jupyter layer: the magic's traitlets (``c.AgentMagics.*``),
the kernel state that holds the configured defaults, the cell's option parser and
``%agent config`` all need the same names, values and help texts, and none of them may
reach up to the extension to get them (docs/architecture.md, "Layers"). This
module imports nothing of IPython, so ``%load_ext`` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal, Protocol

ApproveMode = Literal["ask", "auto", "deny"]
APPROVE_MODES: tuple[ApproveMode, ...] = ("ask", "auto", "deny")
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
TOOL_MODES = ("parallel", "sequential")
CompactMode = Literal["auto", "ask", "off"]
COMPACT_MODES: tuple[CompactMode, ...] = ("auto", "ask", "off")
APPROVE_ENV = "MIBYAN_APPROVE"
"""``ask`` / ``auto`` / ``deny``: wins over the configured default, not over a cell's
``--approve`` (so CI or papermill can allow a notebook's tool calls without editing it).
Read once, when the extension loads (:meth:`KernelState.configure`): a value code sets
later is ignored (docs/architecture.md, "Approvals the agent cannot grant itself")."""


class Defaults(Protocol):
    """What a cell's defaults provide: the loaded magic (its traitlets, read live, so
    ``%config`` changes are seen) or :class:`BuiltinDefaults`."""

    @property
    def model(self) -> str: ...
    @property
    def fallback_models(self) -> list[str]: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def tools(self) -> str: ...
    @property
    def approve(self) -> str: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def max_cost(self) -> float: ...
    @property
    def thinking(self) -> str: ...
    @property
    def tool_mode(self) -> str: ...
    @property
    def headless_wait(self) -> float: ...
    @property
    def db_path(self) -> str: ...
    @property
    def db_url(self) -> str: ...
    @property
    def compact(self) -> str: ...
    @property
    def context_window(self) -> int: ...
    @property
    def variables(self) -> bool: ...
    @property
    def mcp_trust_folders(self) -> list[str]: ...
    @property
    def delegate_turns(self) -> int: ...


@dataclass(frozen=True)
class BuiltinDefaults:
    """The built-in values: the traitlets' defaults, and what a cell uses when the real
    magic runs without ``%load_ext`` (so no configured magic is known)."""

    model: str = ""
    fallback_models: list[str] = field(default_factory=list)
    system_prompt: str = ""
    tools: str = "inspect,python,files"
    approve: str = "ask"
    max_turns: int = 30
    max_tokens: int = 0
    max_cost: float = 0.0
    thinking: str = "off"
    tool_mode: str = "parallel"
    headless_wait: float = 2.0
    db_path: str = ""
    db_url: str = ""
    compact: str = "auto"
    context_window: int = 0
    variables: bool = True
    mcp_trust_folders: list[str] = field(default_factory=list)
    delegate_turns: int = 50


BUILTIN = BuiltinDefaults()

HELP: dict[str, str] = {
    "model": "Default model spec; empty: the first provider with a key, else the demo model.",
    "fallback_models": "Models to fail over to, in order.",
    "system_prompt": "System prompt of new sessions (empty: built-in).",
    "tools": "Default tool groups (or all / none).",
    "approve": "Default approval mode (MIBYAN_APPROVE, as the kernel started, overrides).",
    "max_turns": "Most model calls per cell (0: unlimited).",
    "max_tokens": "Most tokens per cell (0: unlimited).",
    "max_cost": "Most US dollars per cell (0: unlimited).",
    "thinking": "Reasoning effort.",
    "tool_mode": "Tool execution.",
    "headless_wait": "Seconds to wait for a front end before the policy decides approvals.",
    "db_path": "Session database (empty: $MIBYAN_DB or the Jupyter data dir).",
    "db_url": "PostgreSQL team store URL, no password (empty: $MIBYAN_DB_URL); wins over db_path.",
    "compact": "Context compaction: auto | ask (the view asks first) | off.",
    "context_window": "Context window in tokens for every model (0: the bundled table).",
    "variables": "Send a short summary of the user's variables with each request.",
    "delegate_turns": "Each delegated child agent's own turns (--delegate-turns; 0: 50).",
    "mcp_trust_folders": (
        "Folders whose .jupyter/mcp.json servers start without asking (headless runs); "
        "MIBYAN_MCP_TRUST, as the kernel started, adds to them."
    ),
}
"""One help text per setting: the traitlet's ``help`` and ``%agent config``'s meaning."""

SETTING_NAMES: tuple[str, ...] = tuple(sorted(f.name for f in fields(BuiltinDefaults)))


def setting_rows(defaults: Defaults) -> list[tuple[str, str, str]]:
    """(name, current value, meaning) of every setting, sorted by name."""
    return [(name, repr(getattr(defaults, name)), HELP[name]) for name in SETTING_NAMES]
