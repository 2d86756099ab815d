"""A stored session shown in a notebook (``%agent resume``) or written out as a notebook or
Markdown file (``%agent export``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.tables import Message, Table

if TYPE_CHECKING:
    from mibyan_jupyter.export.children import ChildTranscript
    from mibyan_jupyter.export.render import SessionMeta
    from mibyan_jupyter.store.sessions import SessionInfo, SessionStore


class Bundle:
    """A ready mimebundle (the static transcript), displayable as is."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    def __repr__(self) -> str:
        return self.data.get("text/plain", "")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return self.data


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def session_meta(info: SessionInfo, messages: list[Any]) -> SessionMeta:
    from mibyan_jupyter.core.conversation import total_usage
    from mibyan_jupyter.export.render import SessionMeta

    return SessionMeta(
        id=info.id,
        title=info.title,
        model=info.model,
        created_at=info.created_at,
        usage=total_usage(messages),
        cost=info.cost,
        notebook_path=info.notebook_path,
        reviewable=_text(info.config.get("reviewable")),  # the admin policy's line
    )


def show_history(store: SessionStore, session_id: str) -> list[Any]:
    """The session's conversation as a static transcript, plus the approvals that were
    still pending when its kernel stopped (they did not run)."""
    from mibyan_jupyter.export.transcript import render_transcript
    from mibyan_jupyter.store.records import load_messages
    from mibyan_jupyter.store.resume import pending_approvals

    info = store.get(session_id)
    messages = load_messages(store.db, info.id)
    session = session_meta(info, messages)
    status = "completed" if info.status in ("idle", "completed") else info.status
    demo = (info.model or "").startswith("demo")
    shown: list[Any] = [
        Bundle(
            render_transcript(
                messages,
                session=session,
                status=status,
                demo=demo,
                usage=session.usage,
                children=delegated_transcripts(store, info.id),  # folded under their calls
            )
        )
    ]
    pending = pending_approvals(store, info.id)
    if pending:
        rows = [(p.name, p.arguments[:200]) for p in pending]
        shown.append(
            Table(
                ("tool", "arguments"),
                rows,
                caption="Approvals that were pending when the kernel stopped",
                note="These calls did not run; the model is told so. Ask again to run them.",
            )
        )
    shown.append(
        Message(
            f"Resumed session {info.id[:8]} ({info.message_count} messages): "
            "the next %%agent cells continue it."
        )
    )
    return shown


def export_session(
    store: SessionStore,
    session: str | SessionInfo,
    path: str | None,
    fmt: str | None,
    verify: bool,
    *,
    force: bool = False,
) -> Any:
    """Write the session to ``path`` (default: ``session-<id>.ipynb`` in the kernel's
    folder): its whole history across compactions (the real messages, not the summaries
    that replaced them), with spilled tool results put back in full (docs/architecture.md,
    "Store"). An existing file is kept unless ``force``; a path that cannot be written is
    one usage line, and nothing is left half-written."""
    from functools import partial

    from mibyan_jupyter.export.notebook import export_notebook, notebook_text, verify_notebook
    from mibyan_jupyter.export.spilled import inline_spilled
    from mibyan_jupyter.store.lineage import lineage_messages
    from mibyan_jupyter.store.results import full_text
    from mibyan_jupyter.store.session_queries import SessionInfo as Info

    info = session if isinstance(session, Info) else store.get(session)
    messages = inline_spilled(
        lineage_messages(store.db, info.id), partial(full_text, store.db, info.id)
    )
    meta = session_meta(info, messages)
    children = delegated_transcripts(store, info.id)  # what its child agents did
    fmt = fmt or ("md" if path and path.endswith(".md") else "ipynb")
    target = Path(path or f"session-{info.id[:8]}.{fmt}").expanduser()
    if fmt == "md":
        from mibyan_jupyter.export.children import markdown_children
        from mibyan_jupyter.export.markdown import export_markdown

        text = export_markdown(messages, session=meta)
        _write(target, text + (f"\n{markdown_children(children)}\n" if children else ""), force)
        unverified = " (--verify re-runs notebooks only)" if verify else ""
        return Message(f"Wrote {target} ({len(messages)} messages, Markdown).{unverified}")
    notebook = export_notebook(messages, session=meta)
    if children:
        from mibyan_jupyter.export.children import add_child_cells

        add_child_cells(notebook, children)
    _write(target, notebook_text(notebook), force)
    report = f"Wrote {target} ({len(messages)} messages, notebook)."
    if not verify:
        return Message(report)
    try:
        differences = verify_notebook(notebook, cwd=target.parent)
    except ModuleNotFoundError:
        raise AgentUsageError(
            f"{report} --verify re-runs it with nbclient, which is not installed: "
            "pip install nbclient ipykernel"
        ) from None
    except Exception as error:  # no such kernel, a kernel that died: the file is written
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise AgentUsageError(f"{report} --verify could not re-run it: {reason}") from None
    if not differences:
        return Message(report + " Re-running it gave the same outputs.")
    rows = [(d.cell_index, d.recorded[:200], d.actual[:200]) for d in differences]
    return [
        Message(report),
        Table(("cell", "recorded", "re-run"), rows, caption="Outputs that differ on re-run"),
    ]


def _write(target: Path, text: str, force: bool) -> None:
    """Write through the export's atomic writer; file errors become one usage line."""
    from mibyan_jupyter.export.notebook import write_file

    try:
        write_file(target, text, overwrite=force)
    except OSError as error:
        raise AgentUsageError(file_error(target, error)) from None


def file_error(target: Path, error: OSError) -> str:
    """What went wrong writing ``target``, and what to do, in one line."""
    folder = target.parent
    if isinstance(error, FileExistsError):
        return f"{target} already exists: add --force to overwrite it, or give another path"
    if isinstance(error, IsADirectoryError):
        return f"cannot write {target}: it is a folder; give a file name inside it"
    if isinstance(error, FileNotFoundError):
        return f"cannot write {target}: the folder {folder} does not exist (create it first)"
    if isinstance(error, PermissionError):
        return f"cannot write {target}: no permission to write in {folder}"
    return f"cannot write {target}: {error.strerror or error}"


def delegated_transcripts(store: SessionStore, session_id: str) -> list[ChildTranscript]:
    """The child agents the session delegated to, each with its stored transcript (spilled
    results put back), for an export of the session (export/children.py)."""
    from functools import partial

    from mibyan_jupyter.export.children import stored_child
    from mibyan_jupyter.export.spilled import inline_spilled
    from mibyan_jupyter.store.lineage import delegated_children
    from mibyan_jupyter.store.records import load_messages
    from mibyan_jupyter.store.results import full_text

    found: list[ChildTranscript] = []
    for info in delegated_children(store.db, session_id):
        stored = load_messages(store.db, info.id)
        messages = inline_spilled(stored, partial(full_text, store.db, info.id))
        status = info.end_reason or info.status
        found.append(stored_child(session_meta(info, messages), info.config, messages, status))
    return found
