"""Compaction in the loop (issue 10, item 1): preflight, aggressive, on overflow, on demand,
asked, declined, failed; the transcript is replaced in place and the notice says all."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mibyan_jupyter.core import (
    Agent,
    AgentBusyError,
    AssistantMessage,
    CompactionNotice,
    Message,
    ModelRequest,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.compaction import SUMMARY_HEADER, CompactionPlan, CompactionSettings
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.transcript import check_history

WORDS = "word " * 400  # ~560 estimated tokens per message


class Model:
    """Answers summary requests (tool_choice none) with a summary, others per a script;
    records every request (copied: the view is live)."""

    def __init__(self, *, overflow_first: int = 0, fail_summary: bool = False) -> None:
        self.requests: list[ModelRequest] = []
        self.summaries = 0
        self.overflow_first = overflow_first
        self.fail_summary = fail_summary

    async def __call__(self, request: ModelRequest, signal: AbortSignal) -> AssistantMessage:
        self.requests.append(request)
        usage = Usage(input=100, output=10, total=110)
        if request.tool_choice == "none" and not request.tools:
            self.summaries += 1
            if self.fail_summary:
                return AssistantMessage(stop_reason="error", error_message="summary broke")
            return AssistantMessage(content="Goal: test. Names: x.", usage=usage)
        if self.overflow_first:
            self.overflow_first -= 1
            return AssistantMessage(
                stop_reason="error",
                error_kind="context_overflow",
                error_message="prompt is too long",
            )
        return AssistantMessage(content="answer", usage=usage)


def history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(UserMessage(content=f"q{i} {WORDS}"))
        out.append(AssistantMessage(content=f"a{i} {WORDS}"))
    return out


def agent_with(model: Model, settings: CompactionSettings, n: int = 10) -> Agent:
    return Agent(stream_fn=model, messages=history(n), compaction=settings)


def notices(events: Sequence[object]) -> list[CompactionNotice]:
    return [e for e in events if isinstance(e, CompactionNotice)]


async def test_preflight_compacts_in_place_and_the_notice_says_all() -> None:
    model = Model()
    agent = agent_with(model, CompactionSettings(window=8_000, keep_last=4))
    transcript = agent.state.messages
    events: list[object] = []
    agent.subscribe(events.append)
    assert await agent.achat("next") == "answer"
    [notice] = notices(events)
    assert agent.state.messages is transcript  # replaced in place
    assert notice.reason == "preflight"
    assert notice.messages_before == 21
    assert notice.kept_head == 1
    assert notice.kept_tail == 4
    assert notice.summarised == 16
    assert notice.messages_after == 6
    assert notice.tokens_before is not None
    assert notice.tokens_after is not None
    assert notice.tokens_after < notice.tokens_before
    assert list(notice.messages) == agent.state.messages[:6]
    assert SUMMARY_HEADER in str(agent.state.messages[1].content)
    check_history(agent.state.messages)  # a resumable transcript (the summary merges)
    sent = model.requests[-1]
    assert len(sent.messages) == 6
    assert model.summaries == 1


async def test_under_the_window_nothing_is_compacted_and_off_never() -> None:
    for settings in (CompactionSettings(window=1_000_000), CompactionSettings(10, mode="off")):
        model = Model()
        agent = agent_with(model, settings)
        await agent.achat("next")
        assert model.summaries == 0
        assert len(agent.state.messages) == 22


async def test_ask_mode_awaits_confirm_and_a_no_keeps_everything() -> None:
    plans: list[CompactionPlan] = []

    async def decline(plan: CompactionPlan) -> bool:
        plans.append(plan)
        return False

    model = Model()
    agent = agent_with(model, CompactionSettings(8_000, mode="ask", keep_last=4, confirm=decline))
    await agent.achat("next")
    assert [p.reason for p in plans] == ["preflight"]
    assert plans[0].window == 8_000
    assert model.summaries == 0
    assert len(agent.state.messages) == 22


async def test_the_flush_hook_sees_the_middle_before_it_is_summarised() -> None:
    seen: list[int] = []

    async def flush(middle: Sequence[Message]) -> None:
        seen.append(len(middle))

    agent = agent_with(Model(), CompactionSettings(8_000, keep_last=4, before_compaction=flush))
    await agent.achat("next")
    assert seen == [16]


async def test_overflow_compacts_and_retries_once_keeping_the_failed_reply() -> None:
    model = Model(overflow_first=1)
    agent = agent_with(model, CompactionSettings(window=None, keep_last=4))
    events: list[object] = []
    agent.subscribe(events.append)
    assert await agent.achat("next") == "answer"
    [notice] = notices(events)
    assert notice.reason == "overflow"
    assert model.summaries == 1
    failed = [m for m in agent.state.messages if isinstance(m, AssistantMessage) and m.error_kind]
    assert len(failed) == 1  # kept for display ...
    assert all(m is not failed[0] for m in model.requests[-1].messages)  # ... never sent
    assert agent.state.last_end_reason == "completed"


async def test_a_second_overflow_ends_the_run_with_the_providers_error() -> None:
    model = Model(overflow_first=2)
    agent = agent_with(model, CompactionSettings(window=None, keep_last=4))
    await agent.achat("next")
    assert agent.state.last_end_reason == "error"
    assert model.summaries == 1


async def test_a_failed_summary_compacts_nothing_and_the_run_goes_on() -> None:
    model = Model(fail_summary=True)
    agent = agent_with(model, CompactionSettings(window=8_000, keep_last=4))
    assert await agent.achat("next") == "answer"
    assert len(agent.state.messages) == 22


async def test_compact_on_demand_and_busy_refusal() -> None:
    model = Model()
    agent = agent_with(model, CompactionSettings(window=None, keep_last=4))
    events: list[object] = []
    agent.subscribe(events.append)
    notice = await agent.compact()
    assert notice is not None
    assert notice.reason == "manual"
    assert notices(events) == [notice]
    assert len(agent.state.messages) == 6
    assert await agent.compact() is None  # nothing left worth summarising
    agent.state.is_running = True
    with pytest.raises(AgentBusyError):
        await agent.compact()
    agent.state.is_running = False
    assert await agent.achat("go on") == "answer"


async def test_the_summary_call_counts_in_the_budget() -> None:
    agent = agent_with(Model(), CompactionSettings(window=8_000, keep_last=4))
    budgets: list[object] = []
    agent.subscribe(lambda e: budgets.append(e) if e.type == "budget_updated" else None)
    await agent.achat("next")
    last = budgets[-1]
    tokens = {b.name: b.used for b in last.budgets}  # type: ignore[attr-defined]
    assert tokens["turns"] == 1
    assert tokens["input_tokens"] == 200
