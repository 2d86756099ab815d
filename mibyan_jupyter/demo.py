"""``python -m mibyan_jupyter.demo``: run the demo model through the loop in a terminal.

It shows the event stream a `%%agent` cell's view subscribes to: streamed thinking and
text, a read-only tool that runs at once, a side-effecting tool that asks for approval
(answered here by a terminal prompt, or automatically with ``--yes`` or no terminal),
budget updates and the end of the run. No provider key is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter

from .core import (
    Agent,
    AgentEvent,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    Approved,
    BudgetLimits,
    Decision,
    Denied,
    tool,
)
from .core.demo_model import demo_model
from .core.events import MessageEnd, MessageStart, MessageUpdate
from .core.signal import AbortSignal
from .core.stream import TextDelta, TextStart, ThinkingDelta, ThinkingStart


@tool(side_effects=False)
def word_stats(text: str) -> dict[str, object]:
    """Count the words of a text and list the most common ones.

    Args:
        text: The text to analyse.
    """
    words = [w.strip(".,;:!?\"'()").lower() for w in text.split()]
    common = Counter(w for w in words if w).most_common(3)
    return {"words": len(words), "most_common": common}


@tool
def save_note(title: str, body: str = "") -> str:
    """Save a note (pretend: this demo writes nothing). Needs approval: it has side effects.

    Args:
        title: The note's title.
        body: The note's text.
    """
    return f"saved note {title!r} ({len(body)} characters)"


class TerminalApprover:
    """Asks on the terminal; approves by itself when there is no terminal or with --yes."""

    def __init__(self, auto: bool) -> None:
        self.auto = auto or not sys.stdin.isatty()

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        if self.auto:
            print(f"   (approving {request.tool_name} automatically)")
            return Approved()
        answer = await asyncio.to_thread(
            input, f"   approve {request.tool_name}{dict(request.args)}? [y/N] "
        )
        return Approved() if answer.strip().lower() in ("y", "yes") else Denied("the user said no")


def print_event(event: AgentEvent) -> None:
    """One compact line per event (deltas are printed inline as they stream)."""
    kind = event.type
    if isinstance(event, MessageUpdate):
        stream_event = event.event
        if isinstance(stream_event, ThinkingStart | TextStart):
            print(
                "\n   thinking: " if isinstance(stream_event, ThinkingStart) else "\n   text: ",
                end="",
            )
        elif isinstance(stream_event, TextDelta | ThinkingDelta):
            print(stream_event.delta, end="", flush=True)
        return
    if isinstance(event, MessageStart):
        print(
            f"[message_start] {event.message.role}",
            end="" if event.message.role == "assistant" else "\n",
        )
    elif isinstance(event, MessageEnd):
        end = "\n" if event.message.role == "assistant" else ""
        print(
            f"{end}[message_end] {event.message.role}: {str(getattr(event.message, 'content', ''))[:80]!r}"
        )
    elif kind == "tool_execution_start":
        print(f"[tool start] {event.name}({event.args})")  # type: ignore[union-attr]
    elif kind == "tool_execution_end":
        print(f"[tool end] {event.name} -> {event.result.content!r}")  # type: ignore[union-attr]
    elif kind == "budget_updated":
        bars = ", ".join(f"{b.name} {b.used:g}/{b.limit:g}" for b in event.budgets if b.limit)  # type: ignore[union-attr]
        print(f"[budget] {bars}")
    elif kind == "approval_requested":
        print(f"[approval requested] {event.name}: {event.reason}")  # type: ignore[union-attr]
    elif kind == "approval_resolved":
        verdict = "approved" if event.approved else f"denied ({event.reason})"  # type: ignore[union-attr]
        print(f"[approval] {event.name} {verdict} by {event.decided_by}")  # type: ignore[union-attr]
    elif kind == "agent_end":
        print(f"[agent_end] reason={event.reason}, {len(event.messages)} new messages")  # type: ignore[union-attr]
    else:
        print(f"[{kind}]")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "prompt", nargs="?", default="Please save_note about the word_stats of this sentence."
    )
    parser.add_argument("--yes", action="store_true", help="approve tool calls without asking")
    args = parser.parse_args(argv)
    agent = Agent(
        stream_fn=demo_model(delay=0.01),
        tools=[word_stats, save_note],
        system_prompt="You are a helpful demo agent.",
        approval=ApprovalGate(ApprovalPolicy(), TerminalApprover(args.yes)),
        budget=BudgetLimits(max_turns=6),
    )
    agent.subscribe(print_event)
    answer = await agent.achat(args.prompt)
    print("\nFinal answer:\n" + answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
