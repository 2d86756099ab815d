"""What makes a session last, wired per cell: its prompt builder, its compaction settings,
the variables note sent with each request, its spilled-results store and the memory flush.

Why one module: these are the Jupyter layer's inputs to the core's "Prompt builder",
"Context compression" and "Memory" (docs/architecture.md): the core decides when to
compact and how to render, this module only supplies what only a kernel knows (the
notebook, the user's namespace, the view to ask on, the memory folder).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.compaction import CompactionPlan, CompactionSettings
from mibyan_jupyter.core.messages import Message, Usage, UserMessage, content_text
from mibyan_jupyter.core.prompt import PromptBuilder
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest
from mibyan_jupyter.jupyter.kernel_tools.variables import summarize, user_names
from mibyan_jupyter.jupyter.view.ask import Choice, ask
from mibyan_jupyter.secrets import is_secret_name

if TYPE_CHECKING:
    from mibyan_jupyter.core.results import ResultStore
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.view import AgentView
    from mibyan_jupyter.memory import Memory
    from mibyan_jupyter.store.conn import StoreDatabase
    from mibyan_jupyter.store.writer import StoreWriter

NOTE_VARIABLES = 30
"""Variables named in the note at most; the rest are counted."""
NOTE_CHARS = 2_000
"""The variables note is cut at this many characters (it is sent with every request)."""
FLUSH_FACTS = 5
"""Memory entries one flush adds at most."""
FLUSH_CHARS = 12_000
"""The messages a flush shows the model, cut to their last characters."""
FLUSH_TIMEOUT_S = 5.0
"""The end-of-run flush holds the cell's end at most this long."""

COMPACT = Choice("compact", "Compact now", "Summarise the older messages and go on")
KEEP = Choice("keep", "Not now", "Send the conversation as it is")

FLUSH_INSTRUCTIONS = """\
The conversation above is about to be summarised and its details dropped. List the facts
worth remembering in later sessions: the user's lasting preferences and what was learned
about their data and project. One fact per line, each starting with "- ". No secrets, no
one-off details. If nothing is worth keeping, answer NONE."""


def notebook_context(notebook: str | None, kernel: str | None, folder: Path) -> str:
    """The builder's stable context layer: it changes only with the notebook."""
    lines = ["You are working in a Jupyter notebook."]
    if notebook:
        lines.append(f"Notebook: {os.path.basename(notebook)}")
    if kernel:
        lines.append(f"Kernel: {kernel}")
    lines.append(f"Folder: {folder}")
    return "\n".join(lines)


def kernel_name(shell: Any | None) -> str | None:
    """``Python 3.12 (ipykernel)`` in a kernel, ``Python 3.12 (IPython)`` in a terminal."""
    if shell is None:
        return None
    import sys

    where = "ipykernel" if getattr(shell, "kernel", None) is not None else "IPython"
    return f"Python {sys.version_info.major}.{sys.version_info.minor} ({where})"


def session_builder(
    current: PromptBuilder | None,
    instructions: str,
    context: str,
    memory: str,
    pins: Sequence[str] = (),
) -> PromptBuilder:
    """The session's builder with this cell's layers: the same object when it has one
    (its pins and cache live as long as the kernel), else a new one holding ``pins``."""
    builder = current if current is not None else PromptBuilder()
    if current is None:
        for text in pins:
            builder.pin(text)
    builder.instructions, builder.context, builder.memory = instructions, context, memory
    return builder


def variables_note(namespace: Mapping[str, Any], shell: Any | None = None) -> str | None:
    """A short list of the user's variables as they are now (names, types, shapes), or
    ``None`` when there are none. Secret-looking and private names are left out: the
    note goes to the model with every request."""
    names = [n for n in user_names(namespace, shell) if not is_secret_name(n)]
    if not names:
        return None
    lines = []
    for name in names[:NOTE_VARIABLES]:
        try:
            summary = summarize(name, namespace[name])
        except Exception:  # a user object that cannot be described is left out
            continue
        lines.append(
            f"- {summary.name}: {summary.type}" + (f" {summary.shape}" if summary.shape else "")
        )
    if len(names) > NOTE_VARIABLES:
        lines.append(f"- ... and {len(names) - NOTE_VARIABLES} more (list_variables)")
    text = "The user's variables now:\n" + "\n".join(lines)
    return text if len(text) <= NOTE_CHARS else text[: NOTE_CHARS - 3] + "..."


def variables_notes(namespace: Mapping[str, Any], shell: Any | None = None) -> Any:
    """The agent's notes function: the variables note, read fresh before each request."""

    def notes(_context: object) -> list[str]:
        note = variables_note(namespace, shell)
        return [note] if note else []

    return notes


def compaction_settings(
    plan: CellPlan,
    view: AgentView,
    memory: Memory | None,
    on_usage: Callable[[Usage], None] | None = None,
) -> CompactionSettings:
    """The cell's compaction: ``ask`` asks on the view (without a front end, ``ask``
    behaves as ``auto``); with the memory group on, facts are flushed to memory first."""
    options = plan.options
    confirm = None
    if options.compact == "ask" and not plan.headless:

        async def confirm(proposal: CompactionPlan) -> bool:
            answer = await ask(
                view,
                compaction_question(proposal),
                [COMPACT, KEEP],
                default=COMPACT.value,
                headless_wait=plan.headless_wait,
            )
            return answer.value == COMPACT.value

    flush = memory_flush(plan, memory, on_usage) if memory else None
    return CompactionSettings(
        window=plan.model.context_window,
        mode=options.compact,
        confirm=confirm,
        before_compaction=flush,
    )


def compaction_question(proposal: CompactionPlan) -> str:
    window = f" of {proposal.window:,}" if proposal.window else ""
    return (
        f"The conversation is at about {proposal.tokens:,}{window} tokens. Summarise "
        f"{proposal.summarised} older messages, keeping the first and the last "
        f"{proposal.kept_tail}?"
    )


def _flush_text(messages: Sequence[Message]) -> str:
    text = "\n".join(f"{m.role}: {content_text(m.content)}" for m in messages)
    return text[-FLUSH_CHARS:]


def _flush_request(model: str, messages: Sequence[Message], instructions: str) -> ModelRequest:
    return ModelRequest(
        model=model,
        system_prompt="You keep the notebook agent's long-term memory.",
        messages=[UserMessage(content=_flush_text(messages) + "\n\n" + instructions)],
        tools=(),
        tool_choice="none",
    )


def memory_flush(
    plan: CellPlan, memory: Memory, on_usage: Callable[[Usage], None] | None = None
) -> Any:
    """The ``before_compaction`` hook: one tool-less call asks for the facts worth
    keeping; they are added to MEMORY.md (redacted and capped by :class:`Memory`). A
    failed flush never stops the compaction (docs/architecture.md, "Memory"); the call
    is reserved through the cell's budget gate ("Budgets")."""
    from mibyan_jupyter.memory.flush import flush_call

    async def flush(messages: Sequence[Message]) -> None:
        request = _flush_request(plan.model.name, messages, FLUSH_INSTRUCTIONS)
        try:
            reply = await flush_call(
                plan.stream_fn, request, AbortSignal(), plan.gate, plan.prices, on_usage
            )
        except Exception:
            return
        await asyncio.to_thread(add_facts, memory, content_text(reply.content))

    return flush


async def flush_after_run(
    plan: CellPlan,
    end_reason: str | None,
    messages: Sequence[Message],
    *,
    memory: Memory | None = None,
    patience: float = FLUSH_TIMEOUT_S,
    on_usage: Callable[[Usage], None] | None = None,
) -> list[str]:
    """The end-of-run flush (docs/architecture.md, "Memory": flushed "when a run ends
    with an answer that changed something"): with the memory group on, a run that ended
    ``completed`` after a changing tool call or a stated preference (``messages``: this
    run's) asks the cell's model once, tool-less, for facts worth keeping. Returns the
    entries added. Never fails the cell and never holds its end longer than ``patience``:
    a slow, failing or interrupted flush adds nothing."""
    from mibyan_jupyter.memory import Memory
    from mibyan_jupyter.memory.flush import (
        END_INSTRUCTIONS,
        changed_something,
        flush_call,
        keep_facts,
    )

    if "memory" not in plan.groups or end_reason != "completed":
        return []
    if not changed_something(messages):
        return []
    kept = memory if memory is not None else Memory.for_folder(Path.cwd())
    signal = AbortSignal()
    request = _flush_request(plan.model.name, messages, END_INSTRUCTIONS)
    try:
        call = flush_call(plan.stream_fn, request, signal, plan.gate, plan.prices, on_usage)
        reply = await asyncio.wait_for(call, patience)
        return await asyncio.to_thread(keep_facts, kept, content_text(reply.content))
    except (asyncio.CancelledError, KeyboardInterrupt):
        _uncancel()  # Kernel > Interrupt during the flush: the run is over, the cell ends
    except Exception:  # a timeout, a model error, a memory file that cannot be written
        pass
    signal.abort("the memory flush gave up")
    return []


def _uncancel() -> None:
    current = asyncio.current_task()
    if current is not None:
        while current.cancelling():
            current.uncancel()


def session_results(db: StoreDatabase, session_id: str, writer: StoreWriter) -> ResultStore:
    """The session's spilled-results store: kept in the session database through the
    writer's lane (never a write on the event loop), following the writer to a compaction's
    child session (docs/architecture.md, "Store")."""
    from mibyan_jupyter.store.results import SessionResults

    return SessionResults(db, session_id, writer=writer)


def add_facts(memory: Memory, text: str) -> int:
    """Add the ``- fact`` lines of ``text`` to memory (a ``user:`` fact to USER.md);
    how many were added, at most ``FLUSH_FACTS``."""
    from mibyan_jupyter.memory.flush import keep_facts

    return len(keep_facts(memory, text, FLUSH_FACTS))
