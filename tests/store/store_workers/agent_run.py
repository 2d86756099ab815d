"""A tool-using agent run recorded by a StoreWriter, to be killed at a random point.

Usage: ``agent_run.py DB SESSION_ID TURNS``. Prints ``ready`` once the database is open,
starts the run when a line arrives on stdin, then prints ``done <seq> <message json>`` after each message the writer has made durable (this
listener is subscribed after the writer, so it runs once the writer's transaction has
committed), and ``end`` when the run is over. Exit status 2 if the writer reported a
store error. The model streams slowly enough that a run of TURNS turns takes seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentEvent,
    ApprovalGate,
    ApprovalRequest,
    Approved,
    Call,
    Decision,
    MessageEnd,
    Reply,
    ScriptedModel,
    tool,
)
from mibyan_jupyter.core.messages import MESSAGE_ADAPTER
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.writer import StoreWriter


@tool(side_effects=False)
async def measure(sample: int) -> str:
    """Measure a sample.

    Args:
        sample: which one.
    """
    await asyncio.sleep(0.004)
    return f"sample {sample} measures {sample * 7 % 13}"


@tool
def record(sample: int, value: str) -> str:
    """Record a measurement (asks for approval: it has side effects).

    Args:
        sample: which one.
        value: what was measured.
    """
    return f"recorded {value} for sample {sample}"


async def approve(request: ApprovalRequest, signal: AbortSignal) -> Decision:
    await asyncio.sleep(0.002)
    return Approved()


def script(turns: int) -> list[Reply]:
    replies = [
        Reply(
            text=f"Turn {turn}: measuring samples {turn} and {turn + 1}, recording one.",
            calls=[
                Call("measure", {"sample": turn}),
                Call("measure", {"sample": turn + 1}),
                Call("record", {"sample": turn, "value": f"v{turn}"}),
            ],
        )
        for turn in range(turns)
    ]
    return [*replies, Reply(text="All samples measured and recorded.")]


async def run(db: StoreDatabase, session_id: str, turns: int) -> int:
    model = ScriptedModel(script(turns), chunk_size=12, delay=0.002, record=False)
    agent = Agent(
        stream_fn=model,
        model="fake:worker",
        tools=[measure, record],
        approval=ApprovalGate(approver=approve),
    )
    writer = StoreWriter(db, session_id)

    def report(event: AgentEvent) -> None:
        if isinstance(event, MessageEnd) and writer.error is None:
            data = MESSAGE_ADAPTER.dump_json(event.message).decode()
            sys.stdout.write(f"done {writer.last_seq} {data}\n")
            sys.stdout.flush()

    agent.subscribe(writer)
    agent.subscribe(report)
    await agent.prompt("Measure and record the samples.")
    print("end", flush=True)
    if writer.error is not None:
        print(f"error {writer.error}", flush=True)
        return 2
    return 0


def main() -> int:
    path, session_id, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with contextlib.closing(open_database(path)) as db:  # a file or a team store URL
        print("ready", flush=True)
        sys.stdin.readline()
        return asyncio.run(run(db, session_id, turns))


if __name__ == "__main__":
    sys.exit(main())
