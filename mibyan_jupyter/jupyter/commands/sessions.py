"""``%agent sessions | resume | fork | export | delete``: the stored sessions, listed,
searched, continued, copied, written out and removed (a thin layer over the store's API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.cell.sessions import resume_session
from mibyan_jupyter.jupyter.commands.common import cost, count, parser, session_id, short, when
from mibyan_jupyter.jupyter.commands.tables import Highlighted, Message, Table
from mibyan_jupyter.jupyter.state import kernel_state, notebook_path


def sessions(words: list[str]) -> Table:
    args = parser(
        "sessions",
        (("--search",), {}),
        (("--notebook",), {"action": "store_true"}),
        (("--model",), {}),
        (("--limit",), {"default": "20"}),
        (("--children",), {"action": "store_true"}),
    ).parse_args(words)
    limit = count("--limit", args.limit)
    state = kernel_state()
    store = state.store()
    if args.search:
        from mibyan_jupyter.store.search import search

        hits = search(store, args.search, limit=limit)
        rows: list[tuple[Any, ...]] = [
            (short(h.session_id), h.title, h.seq, h.role, Highlighted(h.snippet, h.highlights))
            for h in hits
        ]
        headers = ("session", "title", "#", "role", "snippet")
        return Table(headers, rows, caption=f"Messages matching {args.search!r}")
    notebook = notebook_path() if args.notebook else None
    infos = store.list(notebook=notebook, model=args.model, limit=limit, delegated=args.children)
    current = state.current_session(notebook_path())
    listed = [
        (
            ("▶ " if i.id == current else "") + short(i.id),
            # a delegated child agent's session, under its parent's id
            f"↳ {i.title} (child of {short(i.parent_id or '')})"
            if i.link_kind == "delegation"
            else i.title,
            i.model or "",
            i.message_count,
            cost(i.cost),
            when(i.updated_at),
            i.status,
            Path(i.notebook_path).name if i.notebook_path else "",
        )
        for i in infos
    ]
    columns = ("id", "title", "model", "messages", "cost", "updated", "status", "notebook")
    return Table(columns, listed, caption="Sessions (newest first)", note="▶ = current session")


def resume(words: list[str]) -> Any:
    """Open the session in this kernel (the next cells continue it) and show its history,
    and what had to be repaired to load it. The stream function given here only holds the
    place (the demo model, which needs no key): each cell's plan sets the session's model."""
    args = parser("resume", (("session",), {"nargs": "?", "default": "last"})).parse_args(words)
    from mibyan_jupyter.jupyter.cell.models import choose_model, stream_function
    from mibyan_jupyter.jupyter.commands.history import show_history
    from mibyan_jupyter.store.resume import take_repair_report

    state = kernel_state()
    placeholder = stream_function(choose_model("demo"), ())
    wanted = session_id(args.session) if args.session == "current" else args.session
    handle = resume_session(state, wanted, notebook_path(), placeholder)
    shown = show_history(state.store(), handle.session_id)
    report = take_repair_report(handle.agent)
    if report:
        shown.append(Message("Repaired on load: " + " ".join(report.lines())))
    return shown


def fork(words: list[str]) -> Message:
    args = parser("fork", (("session",), {}), (("--at",), {})).parse_args(words)
    state = kernel_state()
    parent = state.store().get(session_id(args.session))
    at = None if args.at is None else count("--at", args.at, least=0, most=parent.message_count)
    child = state.store().fork(parent.id, at=at)
    # Open the fork here, as resume does: only marking it current left the next cell
    # with no handle for it, and it started a new session instead.
    from mibyan_jupyter.jupyter.cell.models import choose_model, stream_function

    placeholder = stream_function(choose_model("demo"), ())
    resume_session(state, child.id, notebook_path(), placeholder)
    where = f" at message {args.at}" if args.at is not None else ""
    return Message(
        f"Forked {short(args.session)}{where} into {short(child.id)} ({child.message_count} "
        "messages); the next %%agent cells continue the fork."
    )


def export(words: list[str]) -> Any:
    args = parser(
        "export",
        (("session",), {}),
        (("path",), {"nargs": "?"}),
        (("--format",), {"choices": ("ipynb", "md"), "default": None}),
        (("--verify",), {"action": "store_true"}),
        (("--force",), {"action": "store_true"}),
    ).parse_args(words)
    from mibyan_jupyter.jupyter.commands.history import export_session

    store = kernel_state().store()
    return export_session(
        store, session_id(args.session), args.path, args.format, args.verify, force=args.force
    )


def delete(words: list[str]) -> Message:
    args = parser("delete", (("session",), {})).parse_args(words)
    state = kernel_state()
    info = state.store().get(session_id(args.session))
    if state.running(info.id) is not None:
        raise AgentUsageError("that session is running: %agent stop it first")
    state.store().delete(info.id)
    state.forget_session(info.id)
    return Message(f"Deleted session {short(info.id)} ({info.title!r}).")
