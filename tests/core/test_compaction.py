"""Context compression, the pure part: the token estimate, where to cut (never between a
tool call and its result), the summary that replaces the middle, and the result always a
valid transcript."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibyan_jupyter.core import FunctionModel, ScriptedModel
from mibyan_jupyter.core.compaction import (
    SUMMARY_HEADER,
    CompactionPolicy,
    Cut,
    SummaryFailed,
    compacted,
    plan_cut,
    summarise,
    summary_request,
)
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.stream import ModelRequest
from mibyan_jupyter.core.tokens import TokenCounter, message_tokens
from mibyan_jupyter.core.transcript import ModelView, check_history, validate_transcript


def call(n: int) -> ToolCall:
    return ToolCall(id=f"c{n}", function=FunctionCall(name="run_python", arguments="{}"))


def tool_turn(n: int, results: int = 1) -> list[Message]:
    calls = tuple(call(n * 10 + k) for k in range(results))
    return [
        AssistantMessage(tool_calls=calls, stop_reason="tool_use"),
        *(ToolMessage(tool_call_id=c.id, name="run_python", content=f"out {c.id}") for c in calls),
    ]


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = [UserMessage(content="Analyse sales.csv")]
    for n in range(turns):
        messages += tool_turn(n, results=1 + n % 3)
        messages.append(AssistantMessage(content=f"step {n} done"))
        messages.append(UserMessage(content=f"next {n}"))
    return messages


def test_the_policy_compresses_at_half_the_window_and_between_turns_at_85_percent() -> None:
    policy = CompactionPolicy(window=32_000)
    assert not policy.due(16_000)
    assert policy.due(16_001)
    assert not policy.due(27_000, between_turns=True)
    assert policy.due(27_300, between_turns=True)


def test_the_cut_keeps_the_first_user_message_and_never_splits_a_call_from_its_result() -> None:
    messages = conversation(12)
    cut = plan_cut(messages, keep_last=20)
    assert cut is not None
    assert cut.head == 1
    assert not isinstance(messages[cut.tail], ToolMessage)
    assert len(messages) - cut.tail >= 20
    assert plan_cut(conversation(2), keep_last=20) is None  # nothing worth summarising
    assert plan_cut([AssistantMessage(content="hi")]) is None


@given(
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=30),
    st.integers(1, 25),
)
def test_every_compacted_transcript_is_valid_to_send(
    shape: list[tuple[int, bool]], keep_last: int
) -> None:
    """Turns of 0-3 tool calls, an answer and a user message (sometimes two)."""
    messages: list[Message] = [UserMessage(content="task")]
    for n, (results, user_after) in enumerate(shape):
        if results:
            messages += tool_turn(n, results)
        messages.append(AssistantMessage(content=f"answer {n}"))
        messages.append(UserMessage(content=f"more {n}"))  # a model call comes next
        if user_after:  # a queued message delivered with it (merged for the model)
            messages.append(UserMessage(content=f"also {n}"))
    cut = plan_cut(messages, keep_last=keep_last)
    if cut is None:
        return
    after = compacted(messages, cut, "the summary")
    check_history(after)  # a valid history to continue: no call without its result
    view = ModelView(after)  # and valid to send (consecutive user messages merged)
    view.check_ready()
    validate_transcript(view.messages, ready_for_model=True)
    assert after[0] is messages[0]
    assert after[cut.head].content.startswith(SUMMARY_HEADER)  # type: ignore[union-attr]
    kept_calls = {c.id for m in after if isinstance(m, AssistantMessage) for c in m.tool_calls}
    kept_results = {m.tool_call_id for m in after if isinstance(m, ToolMessage)}
    assert kept_calls == kept_results
    assert len(after) < len(messages)


async def test_the_summary_is_asked_without_tools_and_its_text_returned() -> None:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> str:
        seen.append(request)
        return "Goal: analyse sales. Names: sales.csv."

    middle = conversation(3)[1:]
    request = summary_request("demo", "You help.", middle)
    message = await summarise(FunctionModel(reply), request, AbortSignal())
    assert message.content == "Goal: analyse sales. Names: sales.csv."
    (sent,) = seen
    assert sent.tools == ()
    assert sent.tool_choice == "none"
    text = sent.messages[0].content
    assert isinstance(text, str)
    assert "assistant called run_python" in text
    assert "tool run_python returned: out c0" in text
    assert "Do not: anything the user asked you not to do" in text


async def test_a_failed_or_empty_summary_compacts_nothing() -> None:
    request = summary_request("demo", "", conversation(3)[1:])
    with pytest.raises(SummaryFailed):
        await summarise(ScriptedModel([""]), request, AbortSignal())


def test_the_counter_measures_each_message_once_and_follows_a_compaction() -> None:
    messages = conversation(10)
    counter = TokenCounter()
    total = counter.count(messages, "system")
    assert total == counter.count(list(messages), "system")
    messages.append(UserMessage(content="x" * 3600))
    grown = counter.count(messages, "system")
    assert grown == total + message_tokens(messages[-1])
    cut = plan_cut(messages, keep_last=5)
    assert cut is not None
    after = compacted(messages, cut, "short")
    counter.reset()
    assert counter.count(after, "system") < grown


def test_calibration_follows_the_providers_count_within_bounds() -> None:
    counter = TokenCounter()
    messages = conversation(5)
    estimate = counter.count(messages)
    counter.calibrate(estimate, estimate * 2)
    assert counter.ratio == pytest.approx(1.5)
    counter.calibrate(counter.count(messages), estimate * 100)
    assert counter.ratio == 3.0  # clamped
    assert Cut(1, 5).summarised == 4
