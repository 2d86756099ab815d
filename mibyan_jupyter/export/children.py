"""Delegated children in a parent's export: what each child agent did, readable with the
parent's transcript.

Why included and not only linked: the parent's ``delegate_task`` result holds the child's
final answer, not its work (the calls it made, what they returned); a grader reading a
student's exported session must be able to read that work without the kernel or the
store. So an export of the parent carries, after the parent's own conversation, one
section per child (its goal, the parent's call that started it, its session id, which
``%agent export ID`` writes alone), rendered by the same exporters as any session. The
saved cell (export/transcript.py) shows the same children folded under the parent's
transcript (docs/architecture.md, "Tools from outside").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.export.fences import code_span
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.sanitize import sanitize_markdown
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from nbformat import NotebookNode


@dataclass(frozen=True, slots=True)
class ChildTranscript:
    """One delegated child's transcript, as the store or the live view knows it."""

    child_id: str
    """The child's id in its parent's run (``child-1``): its task id."""
    goal: str
    session: SessionMeta
    """The child's own session (its id exports it alone)."""
    messages: Sequence[Message]
    status: str = "completed"
    parent_call_id: str | None = None
    """The parent's ``delegate_task`` call that started it."""


def child_heading(child: ChildTranscript) -> str:
    """One Markdown line naming the child (its goal is model text: sanitized by the caller)."""
    goal = " ".join(child.goal.split())[:200]
    return f"Child agent {code_span(child.child_id)} ({child.status}): {goal}"


def child_facts(child: ChildTranscript) -> str:
    """Where the child came from and how to read it alone."""
    call = f"the call {code_span(child.parent_call_id)}" if child.parent_call_id else "its parent"
    sid = child.session.id
    return (
        f"Delegated by {call}; its own session {code_span(sid)} "
        f"(`%agent export {sid}` writes it alone)."
    )


def markdown_children(children: Sequence[ChildTranscript]) -> str:
    """The Markdown sections to append to a parent's Markdown export ("" for none)."""
    from mibyan_jupyter.export.markdown import export_markdown

    parts: list[str] = []
    for child in children:
        intro = sanitize_markdown(f"# {child_heading(child)}\n\n{child_facts(child)}")
        parts += ["---", REDACT(intro), export_markdown(child.messages, session=child.session)]
    return "\n\n".join(parts)


def add_child_cells(notebook: NotebookNode, children: Sequence[ChildTranscript]) -> None:
    """Append each child's cells to a parent's notebook export: a heading cell, then the
    cells of the child's own export (their ids carry the child's session id, so they
    never repeat the parent's). No children: the notebook is left as it is."""
    if not children:
        return
    import nbformat

    from mibyan_jupyter.export.notebook import export_notebook

    for child in children:
        prefix = re.sub(r"[^A-Za-z0-9_-]", "", child.session.id)[:32] or "child"
        intro = REDACT(sanitize_markdown(f"# {child_heading(child)}\n\n{child_facts(child)}"))
        cell = {"cell_type": "markdown", "id": f"{prefix}-child", "metadata": {}, "source": intro}
        notebook.cells.append(nbformat.from_dict(cell))  # type: ignore[no-untyped-call]
        notebook.cells.extend(export_notebook(child.messages, session=child.session).cells)
    nbformat.validate(notebook)


def child_section(child: ChildTranscript, nested: dict[str, str]) -> tuple[str, str, str]:
    """A child folded into its parent's saved transcript: (HTML, Markdown, text), from the
    child's own static transcript ``nested`` (export/transcript.py renders both). The HTML
    is a closed ``<details>`` (the heading's text escaped; the nested transcript is
    already sanitized); the Markdown a quoted section; the text indented."""
    import html

    from mibyan_jupyter.export.html import markdown_html

    heading = REDACT(child_heading(child))
    summary = markdown_html(heading).removeprefix("<p>").removesuffix("</p>").strip()
    facts = markdown_html(REDACT(child_facts(child)))
    body = (
        f'<details class="mibyan-child" data-child="{html.escape(child.child_id)}"'
        ' style="border-left:3px solid var(--jp-brand-color2,#64b5f6);padding-left:8px;'
        f'margin:6px 0"><summary>{summary}</summary>{facts}{nested["text/html"]}</details>'
    )
    quoted = "\n".join(f"> {line}" if line else ">" for line in nested["text/markdown"].split("\n"))
    markdown = f"> **{heading}**\n>\n{quoted}"
    text = "\n".join(f"    {line}" for line in [heading, *nested["text/plain"].split("\n")])
    return body, markdown, text


def stored_child(
    session: SessionMeta, config: object, messages: Sequence[Message], status: str
) -> ChildTranscript:
    """A child from its stored session: ``config`` is the session's config, whose
    ``delegation`` record (jupyter/cell/delegation.py) names its id, goal and parent call;
    a record edited by hand falls back to the session's own title and id."""
    record = config.get("delegation") if isinstance(config, dict) else None
    record = record if isinstance(record, dict) else {}
    call = record.get("parent_call_id")
    return ChildTranscript(
        child_id=str(record.get("child_id") or session.id[:8]),
        goal=str(record.get("goal") or session.title or ""),
        session=session,
        messages=messages,
        status=status,
        parent_call_id=call if isinstance(call, str) else None,
    )
