"""What a memory flush keeps: whether a finished run is worth one, and how the model's
answer becomes entries of ``MEMORY.md`` and ``USER.md``.

Why here and not in the cell pipeline: the decision reads only the transcript (core
messages) and the outcome writes only the memory files, so it is plain, testable memory
logic; the cell pipeline only makes the one tool-less model call (docs/architecture.md,
"Memory": memory is flushed before every compaction and when a run ends with an answer
that changed something).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from mibyan_jupyter.core.budget_gate import BudgetGate, PriceFn, request_input_tokens
from mibyan_jupyter.core.compaction import SummaryFailed, summarise
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    Message,
    Usage,
    UserMessage,
    content_text,
)
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest, StreamFn
from mibyan_jupyter.memory.files import Memory, MemoryEditError, MemoryKind

CHANGING_TOOLS = frozenset({"run_python", "write_file", "run_shell"})
"""Tools whose calls change the user's world (the kernel, the files, the system)."""
USER_PREFIX = "user:"
"""A fact line that starts with this (after ``- ``) is a preference: it goes to USER.md."""
MAX_FACTS = 5
"""Entries one flush adds at most."""
FLUSH_MAX_TOKENS = 512
"""The flush's reply is at most five short lines: it asks for no more than this."""

_PREFERENCE = re.compile(
    r"\b(i (?:always |usually )?prefer|i(?:'d| would) rather|i like|i don'?t like|"
    r"i want you to|please (?:always|never)|always use|never use|don'?t use|do not use|"
    r"from now on|remember that|in the future)\b",
    re.IGNORECASE,
)

END_INSTRUCTIONS = """\
The conversation above just ended. List the facts worth remembering in later sessions:
what was learned about the user's data and project, and the user's lasting preferences
(start a preference with "user:"). One fact per line, each starting with "- ". No secrets,
no one-off details, nothing already obvious from the files. If nothing is worth keeping,
answer NONE."""


def changed_something(messages: Sequence[Message]) -> bool:
    """Whether the run is worth a flush: a call of a changing tool, or a prompt of the
    user's that states a preference (a run that only read and answered teaches little
    that a later session could not read again)."""
    for message in messages:
        if isinstance(message, AssistantMessage):
            if any(call.function.name in CHANGING_TOOLS for call in message.tool_calls):
                return True
        elif isinstance(message, UserMessage) and _PREFERENCE.search(content_text(message.content)):
            return True
    return False


def fact_lines(text: str) -> list[tuple[MemoryKind, str]]:
    """The ``- fact`` lines of a flush answer, each with the file it belongs in."""
    facts: list[tuple[MemoryKind, str]] = []
    for line in text.splitlines():
        if not line.startswith("- "):
            continue
        fact = line[2:].strip()
        if fact.lower().startswith(USER_PREFIX):
            facts.append(("user", fact[len(USER_PREFIX) :].strip()))
        elif fact:
            facts.append(("memory", fact))
    return facts


def keep_facts(memory: Memory, text: str, limit: int = MAX_FACTS) -> list[str]:
    """Add at most ``limit`` new facts of ``text`` (dedup, redacted and capped by
    :class:`~.files.MemoryFile`); the entries added. A fact that does not fit (too long,
    the file full) is skipped, the rest still count."""
    added: list[str] = []
    for kind, fact in fact_lines(text):
        if len(added) >= limit:
            break
        file = memory.file(kind)
        before = file.entries()
        try:
            after = file.add(fact)
        except MemoryEditError:
            continue
        if len(after) > len(before):
            added.append(after[-1])
    return added


async def flush_call(
    stream_fn: StreamFn,
    request: ModelRequest,
    signal: AbortSignal,
    gate: BudgetGate | None = None,
    prices: PriceFn | None = None,
    on_usage: Callable[[Usage], None] | None = None,
) -> AssistantMessage:
    """The flush's one tool-less call, reserved through the cell's budget gate like every
    model call (docs/architecture.md, "Budgets"): its worst case is held before it is
    sent and what it used counts in the budget. Raises
    :class:`~mibyan_jupyter.core.budget_gate.BudgetRefused` when the budget cannot pay
    for it (nothing is sent), :class:`~mibyan_jupyter.core.compaction.SummaryFailed`
    when the call fails. ``on_usage`` gets what the call used (the session's ledger row:
    the flush is a model call outside the loop's events)."""
    if request.max_tokens is None:
        request = dataclasses.replace(request, max_tokens=FLUSH_MAX_TOKENS)
    reservation = None
    if gate is not None:
        price = prices(request.model) if prices is not None else None
        input_tokens = request_input_tokens(request)
        reservation = gate.reserve(input_tokens, request.max_tokens, price, turns=0)
        request = dataclasses.replace(request, max_tokens=reservation.max_tokens)
    used = Usage()
    try:
        reply = await summarise(stream_fn, request, signal)
        used = reply.usage
        return reply
    except SummaryFailed as failed:
        used = failed.usage or Usage()
        raise
    finally:
        if gate is not None and reservation is not None:
            gate.settle(reservation, used, turn=False)
        if on_usage is not None and used != Usage():
            on_usage(used)  # the ledger's row (``on_usage`` never raises: the writer queues)
