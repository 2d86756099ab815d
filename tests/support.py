"""Shared test helpers: an event recorder and the event-grammar checker."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolMessage,
    TurnEnd,
    TurnStart,
)


class Recorder:
    """An event sink (sync) that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def types(self, *, updates: bool = False) -> list[str]:
        """Event types in order; MessageUpdate and BudgetUpdated left out unless asked."""
        return [
            e.type
            for e in self.events
            if updates or e.type not in ("message_update", "budget_updated")
        ]

    def of(self, cls: type) -> list:  # type: ignore[type-arg]
        return [e for e in self.events if isinstance(e, cls)]


def check_grammar(events: Sequence[AgentEvent]) -> None:
    """Assert the grammar documented in mibyan_jupyter/core/events.py."""
    assert events, "no events"
    assert isinstance(events[0], AgentStart), f"first event is {events[0].type}"
    assert isinstance(events[-1], AgentEnd), f"last event is {events[-1].type}"
    assert sum(isinstance(e, AgentStart) for e in events) == 1
    assert sum(isinstance(e, AgentEnd) for e in events) == 1
    in_turn = False
    open_message: object | None = None
    open_tools: set[str] = set()
    ended_tools: set[str] = set()
    pending_approval: set[str] = set()
    turn_assistants = 0
    for index, event in enumerate(events[1:-1], start=1):
        where = f"event {index} ({event.type})"
        if isinstance(event, TurnStart):
            assert not in_turn, f"{where}: turns nest"
            assert open_message is None, f"{where}: turn starts inside a message"
            assert not open_tools, f"{where}: turn starts with running tools"
            in_turn, turn_assistants = True, 0
        elif isinstance(event, TurnEnd):
            assert in_turn, f"{where}: TurnEnd without TurnStart"
            assert open_message is None, f"{where}: TurnEnd inside a message"
            assert not open_tools, f"{where}: TurnEnd with running tools {open_tools}"
            if (
                event.message is not None
                and event.message.tool_calls
                and event.message.stop_reason not in ("aborted", "error")
            ):
                ids = [c.id for c in event.message.tool_calls]
                assert [r.tool_call_id for r in event.tool_results] == ids, (
                    f"{where}: tool results not one per call in call order"
                )
            in_turn = False
        elif isinstance(event, MessageStart):
            assert in_turn, f"{where}: message outside a turn"
            assert open_message is None, f"{where}: MessageStart inside another message"
            open_message = event.message
            if isinstance(event.message, AssistantMessage):
                turn_assistants += 1
                assert turn_assistants == 1, f"{where}: two assistant messages in one turn"
        elif isinstance(event, MessageUpdate):
            assert open_message is not None, f"{where}: update outside a message"
            assert isinstance(open_message, AssistantMessage), (
                f"{where}: update of a non-assistant message"
            )
        elif isinstance(event, MessageEnd):
            assert open_message is not None, f"{where}: MessageEnd without MessageStart"
            assert open_message.role == event.message.role  # type: ignore[attr-defined]
            open_message = None
        elif isinstance(event, ToolExecutionStart):
            assert in_turn, f"{where}: tool start outside a turn"
            assert open_message is None, f"{where}: tool start inside a message"
            assert event.call_id not in open_tools | ended_tools, f"{where}: tool started twice"
            open_tools.add(event.call_id)
        elif isinstance(event, ToolExecutionUpdate):
            assert event.call_id in open_tools, f"{where}: update for a tool not running"
        elif isinstance(event, ToolExecutionEnd):
            assert event.call_id in open_tools, f"{where}: end without start"
            assert isinstance(event.result, ToolMessage)
            open_tools.discard(event.call_id)
            ended_tools.add(event.call_id)
        elif isinstance(event, ApprovalRequested):
            assert event.call_id in open_tools, f"{where}: approval outside its tool execution"
            pending_approval.add(event.call_id)
        elif isinstance(event, ApprovalResolved):
            assert event.call_id in open_tools, f"{where}: approval outside its tool execution"
            pending_approval.discard(event.call_id)
        elif isinstance(event, AgentStart | AgentEnd):
            raise AssertionError(f"{where}: AgentStart/AgentEnd in the middle")
    assert not in_turn, "the last turn was not closed"
    assert open_message is None, "a message was not closed"
    assert not open_tools, f"tools not closed: {open_tools}"
    assert not pending_approval, f"approvals not resolved: {pending_approval}"


def check_each_run(events: Sequence[AgentEvent]) -> None:
    """``check_grammar`` on each run of a recorder that saw several."""
    run: list[AgentEvent] = []
    for event in events:
        run.append(event)
        if isinstance(event, AgentEnd):
            check_grammar(run)
            run = []
    assert not run, "a run without AgentEnd"


def _fixtures_root() -> Path:
    """``../shared/fixtures`` beside the checkout, or ``$MIBYAN_FIXTURES``; never copied in."""
    override = os.environ.get("MIBYAN_FIXTURES")
    return (
        Path(override) if override else Path(__file__).resolve().parents[2] / "shared" / "fixtures"
    )


PROVIDER_STREAMS = _fixtures_root() / "provider-streams"
"""Recorded real provider streams; tests that read them skip when the folder is absent."""


def cassette(name: str) -> list[dict[str, Any]]:
    """The interactions of a recorded VCR cassette; skips when the fixtures are absent."""
    if not PROVIDER_STREAMS.is_dir():
        pytest.skip(f"recorded streams not found at {PROVIDER_STREAMS}")
    yaml = pytest.importorskip("yaml")
    data: dict[str, Any] = yaml.safe_load((PROVIDER_STREAMS / name).read_text(encoding="utf-8"))
    return list(data["interactions"])


def body_of(interaction: dict[str, Any]) -> bytes:
    """The raw response body (SSE text) of a recorded interaction."""
    text: str = interaction["response"]["body"]["string"]
    return text.encode()


def splits(body: bytes, anchors: list[bytes], margin: int = 40) -> Iterator[list[bytes]]:
    """1-byte and 7-byte chunks, and two pieces split at every offset near each anchor."""
    yield [body[i : i + 1] for i in range(len(body))]
    yield [body[i : i + 7] for i in range(0, len(body), 7)]
    for anchor in anchors:
        at = body.index(anchor)
        for cut in range(max(0, at - margin), min(len(body), at + len(anchor) + margin)):
            yield [body[:cut], body[cut:]]
