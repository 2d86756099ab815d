"""Prompts that reach an agent while it works: a cell run while its session's agent is
busy, or one the front end's queue comm delivered before the cell itself executed.

Why one module: the run and the queue comm hand a prompt to a running agent the same way
(steer, or follow up with ``--after``, and the running cell's view shows it), and a
delivered cell must not run its prompt a second time when it finally executes, unless the
run ended before taking it (docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.jupyter.state import KernelState, SessionHandle
    from mibyan_jupyter.jupyter.view import AgentView

QueueMode = Literal["steer", "follow_up"]


def give_to_running(agent: Agent, view: AgentView, prompt: str, mode: QueueMode) -> None:
    """Queue ``prompt`` on the running ``agent`` and show it in the running cell's view."""
    if mode == "follow_up":
        agent.follow_up(prompt)
    else:
        agent.steer(prompt)
    view.show_queued(prompt, mode)


def already_delivered(state: KernelState, prompt: str) -> bool:
    """A queued cell whose prompt went to a running agent: say where, do not run it again."""
    delivered = state.take_delivered(state.cell_id, prompt)
    if delivered is None:
        return False
    from IPython.display import HTML, display

    how = "a steering message" if delivered.mode == "steer" else "a follow-up"
    display(  # type: ignore[no-untyped-call]
        HTML(  # type: ignore[no-untyped-call]
            '<div class="mibyan-queued-note">This prompt was given to the running agent as '
            f"{how} while it worked; its answer is in the cell that was running.</div>"
        )
    )
    return True


def undeliver_leftovers(state: KernelState, handle: SessionHandle) -> None:
    """Prompts queued too late for the run to take them: their cells will run them."""
    from mibyan_jupyter.core.messages import content_text

    steering, follow_ups = handle.agent.queued
    if not steering and not follow_ups:
        return
    handle.agent.clear_queues()
    left = {content_text(getattr(m, "content", "")) for m in (*steering, *follow_ups)}
    state.forget_delivered(handle.session_id, left)
