"""The parts of a cell's run that are not its wiring (``run.py`` wires loop, store and
view together; these only serve it).

* **Waiting in slices.** The cell awaits its run in short slices rather than in one
  ``await``: SIGINT is only seen when the kernel's loop wakes, so a run waiting on a slow
  model would otherwise hold Kernel > Interrupt until the next network event. On an
  interrupt the run is aborted and given a bounded time to close its events and records,
  and the cell's own cancellation is forgotten, so the cell ends with its one red line
  (docs/architecture.md, "Running inside the kernel").
* **What the run added** (:class:`RunMessages`), even when a compaction rewrites the
  transcript mid-run, and **the header following the session** to a compaction's child
  (:class:`HeaderFollower`; docs/architecture.md, "Context compression").
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.core.events import AgentEnd

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.events import AgentEvent
    from mibyan_jupyter.core.messages import Message
    from mibyan_jupyter.jupyter.view import AgentView

WAKE_S = 0.2
"""The kernel's loop wakes at least this often during a run, so Kernel > Interrupt is
honoured at once even while a model takes its time (measured: without it, the interrupt
waited for the next network event)."""


def uncancel() -> None:
    """Forget a cancellation this task took (Kernel > Interrupt): the cell ends normally."""
    current = asyncio.current_task()
    if current is not None:
        while current.cancelling():
            current.uncancel()


async def await_run(task: asyncio.Task[Any], agent: Agent) -> bool:
    """Wait for the run in short slices (SIGINT is only seen when the loop wakes); on
    Kernel > Interrupt abort it, let it settle and return ``True``."""
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=WAKE_S)
        task.result()
        return False
    except (asyncio.CancelledError, KeyboardInterrupt):
        uncancel()
        agent.abort("interrupted (Kernel > Interrupt)")
        await settle(task)
        return True


async def settle(task: asyncio.Task[Any], limit: float = 10.0) -> None:
    """Let an aborted run close its events and records; give up after ``limit`` seconds."""
    try:
        await asyncio.wait_for(asyncio.shield(task), limit)
    except (asyncio.CancelledError, KeyboardInterrupt, TimeoutError):
        task.cancel()
    except Exception:
        pass  # reported through the task's exception below / the view


class RunMessages:
    """The messages one run added, as its ``AgentEnd`` lists them: not a slice of the
    transcript, which a compaction inside the run rewrites in place (the slice would lose
    the run's own messages). Until the end arrives (a run cut short before it), the
    messages after those the transcript held when the run began."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self._before = len(agent.state.messages)
        self._ended: tuple[Message, ...] | None = None

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, AgentEnd):
            self._ended = event.messages

    def messages(self) -> list[Message]:
        if self._ended is not None:
            return list(self._ended)
        return self._agent.state.messages[self._before :]


class HeaderFollower:
    """The view's header follows the writer to a compaction's child session, like the
    kernel state does (docs/architecture.md, "Context compression"). The writer calls it
    on its own thread: the header is sent from the run's loop."""

    def __init__(self, view: AgentView, loop: asyncio.AbstractEventLoop) -> None:
        self.view: AgentView | None = view
        self._loop = loop

    def __call__(self, _old_id: str, new_id: str) -> None:
        view = self.view
        if view is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(view.set_session, new_id)
