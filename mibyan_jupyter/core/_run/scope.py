"""What every part of one run shares: :class:`RunScope`.

The model call, the tool batch and the preparation of each call all need the same handful
of things from the run that started them: its configuration and context, its abort signal,
the way to emit an event and to append a finished message, the thread pool for sync tools.
Passing them one by one threaded seven or eight parameters through every constructor; one
frozen scope built once per run says what a part may touch, and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mibyan_jupyter.core.config import AgentContext, LoopConfig
from mibyan_jupyter.core.events import EventEmit
from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import StreamFn
from mibyan_jupyter.core.tools import ToolRegistry


@dataclass(frozen=True, slots=True)
class RunScope:
    """One loop invocation, as its parts see it. Built by the run, never by its parts."""

    context: AgentContext
    """System prompt, tools and the transcript (a list the run appends to in place)."""
    config: LoopConfig
    signal: AbortSignal
    stream_fn: StreamFn
    emit: EventEmit
    """Emits through the run's grammar tracker, then to the sink (see :mod:`.grammar`)."""
    append: Callable[[Message], None]
    """Adds a finished message to the transcript; call it before the message's MessageEnd."""
    pool: Callable[[], ThreadPoolExecutor]
    """The run's worker threads for sync tools, created on first use."""

    @property
    def tools(self) -> ToolRegistry:
        return self.context.tools

    @property
    def transcript(self) -> Sequence[Message]:
        return self.context.messages
