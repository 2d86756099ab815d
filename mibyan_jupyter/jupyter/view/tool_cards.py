"""What a tool card and a message's footer say beyond the events themselves: when a call
began to run and how long it took, whether its arguments are code, what approving code
means, and what a reply cost and took.

Kept apart from :mod:`.translate` (the event state machine) so both stay short; every
value here is plain data the front end shows as text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.jupyter.view.ops import StatsOp

POWERS = "Approved code runs with your powers (files, network, keys)."
"""The one line on a run_python / run_shell approval card (docs/architecture.md, "Running
inside the kernel"): approving code is approving whatever it does as you."""

CODE_TOOLS: dict[str, tuple[str, str]] = {
    "run_python": ("python", "code"),
    "run_shell": ("shell", "command"),
}
"""Tools whose arguments are code: the language the card names, and the argument."""


def code_lang(name: str) -> str | None:
    """The language of ``name``'s code argument, when its arguments are shown as code."""
    found = CODE_TOOLS.get(name)
    return found[0] if found else None


def code_text(name: str, args: Any) -> str | None:
    """The code a call runs, when that is all it was given (``run_shell``'s command
    with its default timeout too); else ``None`` (the arguments are shown as JSON)."""
    found = CODE_TOOLS.get(name)
    if found is None or not isinstance(args, Mapping):
        return None
    code = args.get(found[1])
    if not isinstance(code, str) or set(args) - {found[1], "timeout"}:
        return None
    return code


def powers_line(name: str) -> str | None:
    return POWERS if name in CODE_TOOLS else None


_SOURCES: dict[str, str] = {}


def name_source(tool: str, label: str) -> None:
    """Say where a tool comes from (``"server NAME"`` for an MCP server's tool): its
    approval card shows it, so the user sees who would act (docs/architecture.md, "Tools
    from outside"). Kept per kernel: a tool's name says its server (``NAME__tool``)."""
    _SOURCES[tool] = label


def source_label(tool: str) -> str | None:
    return _SOURCES.get(tool)


class ToolClock:
    """When each call began to run (its start, or its approval once it was asked) and
    how long it ran, in wall-clock seconds (the card shows the time of day it began)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._began: dict[str, float] = {}

    def begin(self, call_id: str) -> float:
        """The call runs from now (again, after an approval); returns the time."""
        now = self._clock()
        self._began[call_id] = now
        return now

    def forget(self, call_id: str) -> None:
        self._began.pop(call_id, None)

    def seconds(self, call_id: str) -> float | None:
        began = self._began.pop(call_id, None)
        return None if began is None else round(max(self._clock() - began, 0.0), 3)


class MessageClock:
    """When each assistant message of the view began, for its stats."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._began: dict[str, float] = {}

    def begin(self, ident: str) -> None:
        self._began.setdefault(ident, self._clock())

    def stats(self, ident: str, message: AssistantMessage) -> StatsOp:
        """The message's tokens, cost and time, for the hover on it."""
        began = self._began.pop(ident, None)
        seconds = 0.0 if began is None else round(max(self._clock() - began, 0.0), 3)
        usage = message.usage
        return StatsOp(
            op="stats",
            id=ident,
            input=usage.input + usage.cache_read + usage.cache_write,
            output=usage.output,
            cost=usage.cost,
            seconds=seconds,
        )
