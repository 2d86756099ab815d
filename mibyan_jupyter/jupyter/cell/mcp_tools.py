"""A cell's tools from MCP servers: ``--tools mcp`` (every enabled server) or ``mcp:NAME``.

What a cell does with them (docs/architecture.md, "Tools from outside"):

1. **Which servers**: the user's file and the notebook folder's (``mcp/config.py``). An
   unknown name is the cell's one usage line, listing the configured servers; a disabled
   server named in the cell is one line (``mcp`` alone skips disabled ones quietly); each
   problem in a file is one line, and the other servers still load.
2. **Trust**: a folder's file starts commands, so its servers start only once the user
   trusts the file's bytes (``mcp/trust.py``). Untrusted, the cell asks on its ask card
   ("Trust the MCP servers of ...? It starts: ...", Trust / Not now); headless nobody can
   answer, so the file is not trusted unless configured, and the cell says so in one line.
   The click is the user's, but the trust it writes is refused to code the agent ran.
3. **Start and list**: the kernel's one hub (``mcp/hub.py``) starts each server once per
   kernel on its own thread; a server that does not start is one line and the cell runs
   without it. Values filled into ``${VAR}`` references are added to the redactor first,
   so a server that echoes one never puts it in the store, the view or an export.

The asking needs the kernel's loop (a click arrives through it), so it happens in
:func:`prepare_mcp`, awaited before the cell's tools are built; :func:`mcp_cell_tools`,
called from the sync tool assembler, then returns what was prepared. Called without a
preparation (a caller that cannot await), it decides as headless and waits for the
servers' lists on a worker thread, bounded by :data:`START_WAIT_S`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.guard import WHY, tool_code_on_stack
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.jupyter.view.tool_cards import name_source
from mibyan_jupyter.mcp.config import McpConfig, load_config, starts, user_config_path
from mibyan_jupyter.mcp.spec import McpConfigError, ServerSpec
from mibyan_jupyter.mcp.trust import TRUST_ENV, TrustStore, env_folders
from mibyan_jupyter.secrets import REDACT, is_secret_name

if TYPE_CHECKING:
    from mibyan_jupyter.core.tools import Tool
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting
    from mibyan_jupyter.jupyter.view import AgentView

START_WAIT_S = 30.0
"""Longest a cell waits for its servers to start and list their tools."""
TRUST, NOT_NOW = "trust", "not_now"


@dataclass
class Chosen:
    """The servers a cell asked for: ready to start, waiting for trust, and lines to say."""

    ready: list[ServerSpec] = field(default_factory=list)
    untrusted: list[ServerSpec] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


@dataclass
class _Prepared:
    plan: CellPlan
    tools: list[Tool]


_prepared: list[_Prepared] = []
"""What :func:`prepare_mcp` built for the plan about to be configured (at most one)."""


def trust_check() -> str | None:
    """Trust given from a card click passes; code the agent ran never does."""
    return f"the call comes from code an agent ran; {WHY}" if tool_code_on_stack() else None


def kernel_trust() -> TrustStore:
    """The trust file, with the folders configured as trusted (``mcp_trust_folders`` and
    ``MIBYAN_MCP_TRUST`` as it was when the extension loaded)."""
    defaults = kernel_state().defaults
    configured = [
        *getattr(defaults, "mcp_trust_folders", ()),
        *env_folders(getattr(defaults, "mcp_trust_env", "")),
    ]
    return TrustStore(configured=configured, write_check=trust_check)


def choose(servers: tuple[str, ...], config: McpConfig, trust: TrustStore) -> Chosen:
    """The servers ``mcp`` / ``mcp:NAME`` name; raises :class:`AgentUsageError` for a
    name that is not configured."""
    chosen = Chosen(lines=list(config.problems))
    everything = "mcp" in servers
    names = list(config.servers) if everything else [group[4:] for group in servers]
    if not config.servers:
        raise AgentUsageError(
            f"no MCP server is configured (in {user_config_path()} or the folder's "
            ".jupyter/mcp.json): %agent mcp add NAME --command CMD [--arg A ...] adds one"
        )
    for name in dict.fromkeys(names):
        spec = config.servers.get(name)
        if spec is None:
            known = ", ".join(config.servers)
            raise AgentUsageError(
                f"unknown MCP server {name!r} in --tools; configured: {known} (%agent mcp list)"
            )
        if spec.disabled:
            if not everything:
                chosen.lines.append(
                    f"MCP server {name!r} is disabled in {spec.source}; "
                    f"%agent mcp enable {name} turns it on"
                )
        elif config.from_folder(name) and not trust.is_trusted(
            config.folder_file or Path(), config.folder_digest
        ):
            chosen.untrusted.append(spec)
        else:
            chosen.ready.append(spec)
    return chosen


def folder_starts(config: McpConfig) -> str:
    """Every enabled server of the folder's file and what it starts (or calls)."""
    listed = [
        f"{name} ({starts(spec)})"
        for name, spec in config.servers.items()
        if config.from_folder(name) and not spec.disabled
    ]
    return "; ".join(listed) or "nothing (every server in it is disabled)"


def _chosen(
    servers: tuple[str, ...], config: McpConfig, trust: TrustStore, view: AgentView | None
) -> Chosen:
    """:func:`choose`; on a usage error the cell's live view ends first (the cell then
    shows the one line, and no view is left waiting)."""
    try:
        return choose(servers, config, trust)
    except AgentUsageError:
        if view is not None:
            view.finish([], status="error")
        raise


def trust_question(config: McpConfig) -> str:
    """The ask card's question: the file and every command (or URL) it would start."""
    return f"Trust the MCP servers of {config.folder_file}? It starts: {folder_starts(config)}"


def untrusted_line(config: McpConfig, specs: list[ServerSpec], why: str) -> str:
    names = ", ".join(spec.name for spec in specs)
    return (
        f"{config.folder_file} is not trusted ({why}), so this cell runs without MCP "
        f"server(s) {names}; trust it with %agent mcp trust, or configure "
        f"c.AgentMagics.mcp_trust_folders / {TRUST_ENV} for runs nobody can answer"
    )


async def prepare_mcp(servers: tuple[str, ...], plan: CellPlan, view: AgentView | None) -> None:
    """Choose, ask for trust when a folder's file needs it, start and list the servers;
    :func:`mcp_cell_tools` then returns the tools for ``plan``."""
    _prepared.clear()
    config = load_config(Path.cwd())
    trust = kernel_trust()
    chosen = _chosen(servers, config, trust, view)
    if chosen.untrusted:
        if await _asked(config, view, plan):
            try:
                trust.trust(config.folder_file or Path(), config.folder_digest)
            except OSError as error:  # the click still counts for this cell
                chosen.lines.append(f"trust not saved ({error}); it holds for this cell only")
            chosen.ready += chosen.untrusted
        else:
            why = "headless: nobody can answer" if plan.headless or view is None else "Not now"
            chosen.lines.append(untrusted_line(config, chosen.untrusted, why))
    tools = await start_all(chosen.ready, chosen.lines)
    tell(chosen.lines, view)
    _prepared.append(_Prepared(plan, tools))


async def _asked(config: McpConfig, view: AgentView | None, plan: CellPlan) -> bool:
    """Whether the user clicked Trust (``False`` at once when nobody can answer)."""
    if view is None or plan.headless:
        return False
    from mibyan_jupyter.jupyter.view.ask import Choice, ask

    choices = [
        Choice(
            TRUST, "Trust", "start this file's servers now and in later cells, until it changes"
        ),
        Choice(NOT_NOW, "Not now", "run this cell without them"),
    ]
    answer = await ask(
        view,
        trust_question(config),
        choices,
        default=NOT_NOW,
        headless=plan.headless,
        headless_wait=plan.headless_wait,
    )
    return answer.value == TRUST


def mcp_cell_tools(servers: tuple[str, ...], setting: ToolSetting) -> list[Tool]:
    """The tools of the MCP servers ``servers`` names (``mcp`` / ``mcp:NAME`` groups)."""
    for prepared in _prepared:
        if prepared.plan is setting.plan:
            _prepared.clear()
            return prepared.tools
    config = load_config(setting.root)
    chosen = _chosen(servers, config, kernel_trust(), setting.view)
    if chosen.untrusted:
        chosen.lines.append(untrusted_line(config, chosen.untrusted, "nobody was asked"))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mibyan-mcp-start") as pool:
        tools = pool.submit(asyncio.run, start_all(chosen.ready, chosen.lines)).result()
    tell(chosen.lines, setting.view)
    return tools


async def start_all(specs: list[ServerSpec], lines: list[str]) -> list[Tool]:
    """Every server's tools (started in parallel, :data:`START_WAIT_S` at most); a server
    that cannot start adds one line to ``lines`` instead."""
    from mibyan_jupyter.mcp.hub import kernel_hub

    hub = kernel_hub()
    wanted = [spec for spec in specs if _secrets_known(spec, lines)]
    results = await asyncio.gather(
        *(asyncio.wait_for(hub.tools(spec), START_WAIT_S) for spec in wanted),
        return_exceptions=True,
    )
    tools: list[Tool] = []
    for spec, result in zip(wanted, results, strict=True):
        if isinstance(result, BaseException):
            what = "did not start within" if isinstance(result, TimeoutError) else "failed:"
            detail = f"{START_WAIT_S:g} s" if isinstance(result, TimeoutError) else str(result)
            lines.append(f"MCP server {spec.name!r} {what} {detail}; the cell runs without it")
            continue
        for tool in result:
            if any(tool.name == other.name for other in tools):
                lines.append(f"MCP tool {tool.name} of server {spec.name!r} skipped: name taken")
                continue
            name_source(tool.name, f"server {spec.name}")
            tools.append(tool)
    return tools


def _secrets_known(spec: ServerSpec, lines: list[str]) -> bool:
    """Fill the spec's ``${VAR}`` references once to check them, and teach the redactor
    every value that came from a reference or sits under a secret-looking key."""
    try:
        filled = {**spec.resolved_env(), **spec.resolved_headers()}
    except McpConfigError as error:
        lines.append(f"{error}; the cell runs without it")
        return False
    written = {**spec.env, **spec.headers}
    for key, value in filled.items():
        if "${" in written[key] or is_secret_name(key, environment=True):
            REDACT.add(value)
    return True


def tell(lines: list[str], view: AgentView | None) -> None:
    """Each line in the cell's output (kept in the saved notebook) and on the view."""
    for line in dict.fromkeys(lines):
        shown = REDACT(line)
        print(f"mibyan: {shown}", file=sys.stderr)
        if view is not None:
            view.show_notice(shown, level="warning")
