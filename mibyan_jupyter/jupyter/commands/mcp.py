"""``%agent mcp list|add|remove|enable|disable|tools|trust|untrust``: the MCP servers cells
can use (docs/architecture.md, "Tools from outside").

``add``/``remove``/``enable``/``disable`` edit the user's file (``mcp/config.py``) and never
a folder's: a folder's file is the folder's, and this kernel only decides whether to trust
it (``trust``/``untrust``, the same as the cell's Trust button). Each change works only from
a cell the user runs, never from code inside an agent run (jupyter/guard.py): a server is a
command the kernel starts, so the agent must not configure or trust one for itself.
Values are shown as written when they are ``${VAR}`` references; a literal value under
``env`` or ``headers`` is never shown (it may be a secret), and all text is redacted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any

from mibyan_jupyter.jupyter.cell.mcp_tools import choose, folder_starts, kernel_trust, start_all
from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.common import parser
from mibyan_jupyter.jupyter.commands.tables import Message, Table
from mibyan_jupyter.jupyter.guard import refuse_inside_run
from mibyan_jupyter.mcp.config import (
    McpConfig,
    edit_user_file,
    load_config,
    parse_entry,
    starts,
    user_config_path,
)
from mibyan_jupyter.mcp.spec import McpConfigError, ServerSpec
from mibyan_jupyter.secrets import REDACT

ACTIONS = ("list", "add", "remove", "enable", "disable", "tools", "trust", "untrust")
CHANGES = ("add", "remove", "enable", "disable", "trust", "untrust")


def mcp(words: list[str]) -> Table | Message:
    args = parser(
        "mcp",
        (("action",), {"nargs": "?", "default": "list", "choices": ACTIONS}),
        (("name",), {"nargs": "?"}),
        (("--command",), {}),
        (("--arg",), {"action": "append", "default": []}),
        (("--env",), {"action": "append", "default": []}),
        (("--cwd",), {}),
        (("--url",), {}),
        (("--header",), {"action": "append", "default": []}),
        (("--timeout",), {"type": float}),
    ).parse_intermixed_args(words)
    if args.action in CHANGES:
        refuse_inside_run(f"%agent mcp {args.action}")
    if args.action in ("add", "remove", "enable", "disable") and not args.name:
        raise AgentUsageError(f"%agent mcp {args.action} needs a server's NAME")
    try:
        if args.action == "add":
            return _add(args)
        if args.action in ("remove", "enable", "disable"):
            return _edit(args.action, args.name)
        if args.action == "tools":
            return _tools(args.name)
        if args.action in ("trust", "untrust"):
            return _trust(args.action == "trust")
    except McpConfigError as error:
        raise AgentUsageError(f"%agent mcp {args.action}: {error}") from None
    return server_table(load_config(Path.cwd()))


def server_table(config: McpConfig) -> Table:
    """Every configured server: where it is written, what it starts, whether it may."""
    from mibyan_jupyter.mcp.hub import kernel_hub

    running = {status.name: status for status in kernel_hub().status()}
    trust = kernel_trust()
    rows = []
    for name, spec in config.servers.items():
        status = running.get(name)
        state: str = "not started" if status is None else status.state
        if status is not None and status.state == "running":
            state += f", {status.tools} tools" + (f", pid {status.pid}" if status.pid else "")
        if status is not None and status.error:
            state += f"\n{status.error}"
        trusted = "yes (your file)"
        if config.from_folder(name) and config.folder_file is not None:
            trusted = trust.state(config.folder_file, config.folder_digest)
        shown = f"{starts(spec)}{settings_text(spec)}"
        rows.append((name, "off" if spec.disabled else "on", spec.transport, shown, state, trusted))
    note = f"Your file: {user_config_path()}." + (
        f" This folder's: {config.folder_file}." if config.folder_file else ""
    )
    if config.problems:
        note += " Problems: " + " | ".join(config.problems)
    headers = ("server", "enabled", "transport", "starts", "state", "trusted")
    return Table(headers, rows, caption="MCP servers", note=REDACT(note))


def settings_text(spec: ServerSpec) -> str:
    """``env`` / ``headers`` as written when they are references, else hidden."""
    pairs = [*spec.env.items(), *spec.headers.items()]
    shown = [f"{key}={value if value.startswith('${') else '(hidden)'}" for key, value in pairs]
    return ("\n" + ", ".join(shown)) if shown else ""


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AgentUsageError(
                f"{flag} takes KEY=VALUE (a secret as KEY=${{VAR}}); got {item!r}"
            )
        found[key] = value
    return found


def _add(args: Any) -> Message:
    entry: dict[str, Any] = {}
    if args.command is not None:
        entry = {"command": args.command, "args": list(args.arg)}
        if args.env:
            entry["env"] = _pairs(args.env, "--env")
        if args.cwd is not None:
            entry["cwd"] = args.cwd
    if args.url is not None:
        entry.update(url=args.url)
        if args.header:
            entry["headers"] = _pairs(args.header, "--header")
    if args.timeout is not None:
        entry["timeout"] = args.timeout
    path = user_config_path()
    parse_entry(args.name, entry, path)  # one line naming the problem, before any write
    literal = [
        key
        for key, value in {**entry.get("env", {}), **entry.get("headers", {})}.items()
        if "${" not in value
    ]
    edit_user_file(lambda servers: servers.__setitem__(args.name, entry), path)
    _stop(args.name)  # a server started with the old entry starts again with the new one
    text = f"Added MCP server {args.name!r} to {path}; use it with %%agent --tools mcp:{args.name}"
    if literal:
        text += (
            f". {', '.join(literal)} written as a literal value (owner-only file); "
            "a ${VAR} reference (typed ${{VAR}} in %agent) keeps the secret out of the file"
        )
    return Message(text)


def _edit(action: str, name: str) -> Message:
    path = user_config_path()
    config = load_config(Path.cwd())
    if config.from_folder(name):
        raise AgentUsageError(
            f"%agent mcp {action}: {name!r} is configured in {config.folder_file}, the folder's "
            "file; edit that file (this command edits only yours)"
        )

    def change(servers: dict[str, Any]) -> None:
        if name not in servers or not isinstance(servers[name], dict):
            known = ", ".join(servers) or "none"
            raise McpConfigError(f"no server {name!r} in {path} (yours: {known})")
        if action == "remove":
            del servers[name]
        elif action == "enable":
            servers[name].pop("disabled", None)
        else:
            servers[name]["disabled"] = True

    edit_user_file(change, path)
    if action != "enable":
        _stop(name)
    done = {"remove": "Removed", "enable": "Enabled", "disable": "Disabled"}[action]
    return Message(f"{done} MCP server {name!r} in {path}.")


def _stop(name: str) -> None:
    from mibyan_jupyter.mcp.hub import kernel_hub

    kernel_hub().stop(name)


def _tools(name: str | None) -> Table:
    """The tools of one server or every enabled one (starting them, bounded)."""
    config = load_config(Path.cwd())
    chosen = choose((f"mcp:{name}",) if name else ("mcp",), config, kernel_trust())
    lines = list(chosen.lines)
    lines += [
        f"{spec.name}: not started ({config.folder_file} is not trusted)"
        for spec in chosen.untrusted
    ]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mibyan-mcp-start") as pool:
        tools = pool.submit(asyncio.run, start_all(chosen.ready, lines)).result()
    rows = [
        (str(getattr(tool, "server", "")), tool.name, REDACT(tool.description)) for tool in tools
    ]
    return Table(
        ("server", "tool", "description"), rows, caption="MCP tools", note=" | ".join(lines)
    )


def _trust(trusting: bool) -> Message:
    config = load_config(Path.cwd())
    file = config.folder_file
    if file is None:
        raise AgentUsageError(f"this folder has no .jupyter/mcp.json ({Path.cwd()})")
    store = kernel_trust()
    if not trusting:
        forgot = store.forget(file)
        return Message(f"{file}: {'no longer trusted' if forgot else 'was not trusted'}.")
    store.trust(file, config.folder_digest)
    return Message(REDACT(f"Trusted {file} as it is now; it starts: {folder_starts(config)}"))
