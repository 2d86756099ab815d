"""``%agent <command>``: sessions, resume, fork, export, stop, status, policy, config,
models, delete — a thin layer over the store's Python API; results are tables, not dicts."""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mibyan_jupyter.jupyter.options import AgentUsageError
from mibyan_jupyter.jupyter.sessions import resume_session, user_facing
from mibyan_jupyter.jupyter.state import kernel_state, notebook_path
from mibyan_jupyter.jupyter.tables import Message, Table

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.magic import AgentMagics
    from mibyan_jupyter.store.sessions import SessionInfo

COMMANDS_HELP = """\
%agent sessions [--search TEXT] [--notebook] [--model M] [--limit N]
                                        list sessions, or search their messages
%agent resume last|ID                   show a session's history and continue it in the next cells
%agent fork ID [--at N]                 copy a session up to message N into a new session
%agent export ID [PATH] [--format ipynb|md] [--verify]
                                        write a session as a runnable notebook or Markdown
%agent stop                             stop the running agent
%agent status                           the current session, model, usage and database
%agent policy [show | set TOOL allow|deny|ask | reset [TOOL]]
                                        approval rules ("allow"/"deny" persist as "always")
%agent config                           the settings of %%agent cells (c.AgentMagics.*)
%agent models                           models you can use and whether their keys are set
%agent delete ID                        delete a session and its messages
ID is a session id or its first characters, "last" or "current" (this notebook's).
A %%agent cell's options: %%agent --help"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise AgentUsageError(f"%agent {self.prog}: {message} (see %agent --help)")


def _parser(name: str, *arguments: tuple[tuple[str, ...], dict[str, Any]]) -> _Parser:
    parser = _Parser(prog=name, add_help=False)
    for flags, options in arguments:
        parser.add_argument(*flags, **options)
    return parser


def _short(session_id: str) -> str:
    return session_id[:8]


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else ""


def _cost(value: float | None) -> str:
    return "" if value is None else f"${value:.4f}"


def session_id(text: str) -> str:
    """A full session id from ``current`` (this notebook's), ``last``, an id or a prefix."""
    state = kernel_state()
    if text == "current":
        current = state.current.get(notebook_path())
        if current is None:
            raise AgentUsageError("this notebook has no current session yet")
        return current
    if text == "last":
        info = state.store().last()
        if info is None:
            raise AgentUsageError("there is no session yet: run a %%agent cell first")
        return info.id
    return state.store().get(text).id


def sessions(words: list[str], magics: AgentMagics) -> Table:
    args = _parser(
        "sessions",
        (("--search",), {}),
        (("--notebook",), {"action": "store_true"}),
        (("--model",), {}),
        (("--limit",), {"type": int, "default": 20}),
    ).parse_args(words)
    store = kernel_state().store()
    if args.search:
        from mibyan_jupyter.store.search import search

        hits = search(store, args.search, limit=args.limit)
        rows: list[tuple[Any, ...]] = [
            (_short(h.session_id), h.title, h.seq, h.role, h.snippet) for h in hits
        ]
        headers = ("session", "title", "#", "role", "snippet")
        return Table(
            headers, rows, caption=f"Messages matching {args.search!r}", highlight=["snippet"]
        )
    notebook = notebook_path() if args.notebook else None
    infos = store.list(notebook=notebook, model=args.model, limit=args.limit)
    current = kernel_state().current.get(notebook_path())
    listed = [
        (
            ("▶ " if i.id == current else "") + _short(i.id),
            i.title,
            i.model or "",
            i.message_count,
            _cost(i.cost),
            _when(i.updated_at),
            i.status,
            Path(i.notebook_path).name if i.notebook_path else "",
        )
        for i in infos
    ]
    columns = ("id", "title", "model", "messages", "cost", "updated", "status", "notebook")
    return Table(columns, listed, caption="Sessions (newest first)", note="▶ = current session")


def resume(words: list[str], magics: AgentMagics) -> Any:
    args = _parser("resume", (("session",), {"nargs": "?", "default": "last"})).parse_args(words)
    from mibyan_jupyter.jupyter.history import show_history
    from mibyan_jupyter.jupyter.models import choose_model, stream_function

    chosen = choose_model(magics.model)
    state = kernel_state()
    handle = resume_session(state, args.session, notebook_path(), stream_function(chosen, ()))
    return show_history(state.store(), handle.session_id)


def fork(words: list[str], magics: AgentMagics) -> Message:
    args = _parser("fork", (("session",), {}), (("--at",), {"type": int})).parse_args(words)
    store = kernel_state().store()
    child = store.fork(session_id(args.session), at=args.at)
    kernel_state().current[notebook_path()] = child.id
    where = f" at message {args.at}" if args.at is not None else ""
    return Message(
        f"Forked {_short(args.session)}{where} into {_short(child.id)} ({child.message_count} "
        "messages); the next %%agent cells continue the fork."
    )


def export(words: list[str], magics: AgentMagics) -> Any:
    args = _parser(
        "export",
        (("session",), {}),
        (("path",), {"nargs": "?"}),
        (("--format",), {"choices": ("ipynb", "md"), "default": None}),
        (("--verify",), {"action": "store_true"}),
    ).parse_args(words)
    from mibyan_jupyter.jupyter.history import export_session

    store = kernel_state().store()
    return export_session(store, session_id(args.session), args.path, args.format, args.verify)


def stop(words: list[str], magics: AgentMagics) -> Message:
    runs = list(kernel_state().runs.values())
    for run in runs:
        agent = kernel_state().sessions[run.session_id].agent
        agent.abort("stopped with %agent stop")
    return Message(f"Stopping {len(runs)} run(s)." if runs else "No agent is running.")


def status(words: list[str], magics: AgentMagics) -> Table:
    state = kernel_state()
    current = state.current.get(notebook_path())
    rows: list[tuple[str, str]] = [("database", str(state.store().db.path))]
    if current is None:
        rows.append(("session", "none yet (the next %%agent cell starts one)"))
    else:
        info: SessionInfo = state.store().get(current)
        run = state.runs.get(current)
        rows += [
            ("session", f"{info.id} — {info.title}"),
            ("model", info.model or ""),
            ("messages", str(info.message_count)),
            ("cost", _cost(info.cost) or "unknown"),
            ("status", "running" if run else info.status),
        ]
    rows.append(("notebook", notebook_path() or "(unknown to the kernel)"))
    return Table(("", ""), rows, caption="Agent status")


def policy(words: list[str], magics: AgentMagics) -> Any:
    args = _parser(
        "policy",
        (("action",), {"nargs": "?", "default": "show", "choices": ("show", "set", "reset")}),
        (("tool",), {"nargs": "?"}),
        (("decision",), {"nargs": "?", "choices": ("allow", "deny", "ask")}),
    ).parse_args(words)
    state = kernel_state()
    store = state.store()
    handles = list(state.sessions.values())
    if args.action == "set":
        if not args.tool or not args.decision:
            raise AgentUsageError("%agent policy set TOOL allow|deny|ask")
        for handle in handles:
            handle.policy.session.pop(args.tool, None)
            handle.policy.always.pop(args.tool, None)
        if args.decision == "ask":
            store.forget_always_rule(args.tool)
        else:
            store.save_always_rule(args.tool, args.decision == "allow")
            for handle in handles:
                handle.policy.always[args.tool] = args.decision == "allow"
    elif args.action == "reset":
        tools = [args.tool] if args.tool else list(store.always_rules())
        for tool in tools:
            store.forget_always_rule(tool)
        for handle in handles:
            for remembered in (handle.policy.session, handle.policy.always):
                for tool in [args.tool] if args.tool else list(remembered):
                    remembered.pop(tool, None)
    rows = [
        (t, "allow" if ok else "deny", "always (saved)") for t, ok in store.always_rules().items()
    ]
    current = state.sessions.get(state.current.get(notebook_path()) or "")
    if current is not None:
        rows += [
            (t, "allow" if ok else "deny", "this session")
            for t, ok in current.policy.session.items()
        ]
    note = "Tools with side effects ask by default; read-only tools run without asking."
    return Table(("tool", "decision", "scope"), rows, caption="Approval policy", note=note)


def config(words: list[str], magics: AgentMagics) -> Table:
    rows = [
        (f"c.AgentMagics.{name}", repr(getattr(magics, name)), trait.help or "")
        for name, trait in sorted(magics.traits(config=True).items())
    ]
    return Table(("setting", "value", "meaning"), rows, caption="%%agent defaults")


def models(words: list[str], magics: AgentMagics) -> Table:
    from mibyan_jupyter.jupyter.models import model_rows

    return Table(("model", "provider", "status"), model_rows(), caption="Models")


def delete(words: list[str], magics: AgentMagics) -> Message:
    args = _parser("delete", (("session",), {})).parse_args(words)
    state = kernel_state()
    info = state.store().get(session_id(args.session))
    if info.id in state.runs:
        raise AgentUsageError("that session is running: %agent stop it first")
    state.store().delete(info.id)
    state.sessions.pop(info.id, None)
    for notebook, current in list(state.current.items()):
        if current == info.id:
            del state.current[notebook]
    return Message(f"Deleted session {_short(info.id)} ({info.title!r}).")


COMMANDS: dict[str, Callable[[list[str], AgentMagics], Any]] = {
    "sessions": sessions,
    "resume": resume,
    "fork": fork,
    "export": export,
    "stop": stop,
    "status": status,
    "policy": policy,
    "config": config,
    "models": models,
    "delete": delete,
}


def run_command(line: str, magics: AgentMagics) -> Any:
    """Dispatch ``%agent <line>``; store and usage errors become one-line errors."""
    from mibyan_jupyter.store.db import StoreError

    try:
        words = shlex.split(line)
    except ValueError as error:
        raise AgentUsageError(f"cannot read the arguments: {error}") from None
    command = COMMANDS.get(words[0])
    if command is None:
        raise AgentUsageError(
            f"unknown command {words[0]!r}: one of {', '.join(COMMANDS)} (see %agent --help)"
        )
    try:
        result = command(words[1:], magics)
    except StoreError as error:
        raise user_facing(error) from None
    if isinstance(result, list):  # several rich outputs: each shown as itself, not a list repr
        from IPython.display import display

        for item in result:
            display(item)  # type: ignore[no-untyped-call]
        return None
    return result
