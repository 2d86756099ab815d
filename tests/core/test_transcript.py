"""The alternation rules (``validate_transcript``) and the incremental ``ModelView``."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from mibyan_jupyter.core import (
    AssistantMessage,
    FunctionCall,
    ImagePart,
    Message,
    ModelView,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    TranscriptError,
    UserMessage,
    validate_transcript,
)
from mibyan_jupyter.core.messages import ImageUrl


def sys_(text: str = "sys") -> SystemMessage:
    return SystemMessage(content=text)


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text)


def asst(text: str = "ok", *call_ids: str, stop: str | None = None) -> AssistantMessage:
    calls = tuple(
        ToolCall(id=cid, function=FunctionCall(name=f"t_{cid}", arguments="{}")) for cid in call_ids
    )
    reason = stop or ("tool_use" if calls else "stop")
    return AssistantMessage(content=text, tool_calls=calls, stop_reason=reason)  # type: ignore[arg-type]


def result(call_id: str) -> ToolMessage:
    return ToolMessage(tool_call_id=call_id, name=f"t_{call_id}", content="done")


def assert_invalid(
    messages: Sequence[Message], index: int, *fragments: str, ready: bool = False
) -> TranscriptError:
    with pytest.raises(TranscriptError) as info:
        validate_transcript(messages, ready_for_model=ready)
    error = info.value
    assert error.index == index
    assert f"invalid transcript at index {index}:" in str(error)
    for fragment in fragments:
        assert fragment in str(error), f"{fragment!r} not in {str(error)!r}"
    assert isinstance(error, ValueError)
    return error


# -- each rule -------------------------------------------------------------------------------


def test_system_not_first() -> None:
    assert_invalid([user(), asst(), sys_()], 2, "system message may only come first")
    assert_invalid([sys_(), sys_()], 1, "system message may only come first")


def test_first_non_system_must_be_user() -> None:
    assert_invalid([sys_(), asst()], 1, "must be a user message")
    assert_invalid([asst()], 0, "must be a user message")


def test_two_users_in_a_row() -> None:
    assert_invalid([sys_(), user(), user()], 2, "two user messages in a row")
    assert_invalid([user(), asst(), user(), user()], 3, "two user messages in a row")


def test_two_assistants_in_a_row() -> None:
    assert_invalid([user(), asst(), asst()], 2, "two assistant messages in a row")
    assert_invalid([sys_(), user(), asst(), user(), asst(), asst("x", "c1")], 5, "two assistant")


def test_tool_result_without_a_call() -> None:
    assert_invalid([user(), result("c1")], 1, "'c1'", "does not follow an assistant tool call")
    assert_invalid([result("c1")], 0, "does not follow")
    assert_invalid([user(), asst(), result("c1")], 2, "does not follow")


def test_tool_result_after_a_complete_batch() -> None:
    messages = [user(), asst("x", "c1"), result("c1"), result("c1")]
    assert_invalid(messages, 3, "does not follow an assistant tool call")


def test_tool_result_with_unknown_id() -> None:
    messages = [user(), asst("x", "c1", "c2"), result("zz")]
    assert_invalid(
        messages, 2, "unknown or already answered", "'zz'", "assistant message at index 1"
    )


def test_duplicate_tool_result() -> None:
    messages = [sys_(), user(), asst("x", "c1", "c2"), result("c1"), result("c1")]
    assert_invalid(messages, 4, "already answered", "'c1'", "assistant message at index 2")


@pytest.mark.parametrize(
    ("intruder", "role"),
    [(user("steer"), "user"), (asst("again"), "assistant"), (sys_(), "system")],
)
def test_non_tool_message_before_all_results(intruder: Message, role: str) -> None:
    messages = [sys_(), user(), asst("x", "c1", "c2", "c3"), result("c2"), intruder]
    error = assert_invalid(messages, 4, f"{role} message before the results")
    assert "assistant message at index 2" in str(error)
    assert "(missing: c1, c3)" in str(error)


def test_non_tool_message_right_after_calls() -> None:
    messages = [user(), asst("x", "b", "a"), user()]
    assert_invalid(messages, 2, "assistant message at index 1", "(missing: a, b)")


def test_duplicate_call_ids() -> None:
    assert_invalid([user(), asst("x", "c1", "c1")], 1, "duplicate tool call id 'c1'")
    assert_invalid([user(), asst("x", "c1", "c2", "c1")], 1, "duplicate tool call id 'c1'")


def test_ready_for_model_assistant_tail() -> None:
    messages = [user(), asst()]
    validate_transcript(messages)
    assert_invalid(messages, 1, "ends with an assistant message", ready=True)


def test_ready_for_model_missing_results() -> None:
    messages = [sys_(), user(), asst("x", "c1", "c2", "c3"), result("c2")]
    validate_transcript(messages)  # fine as a prefix
    assert_invalid(
        messages, 2, "tool calls without results at the end", "(missing: c1, c3)", ready=True
    )


@pytest.mark.parametrize(
    "messages",
    [[], [sys_()]],
    ids=["empty", "system-only"],
)
def test_ready_for_model_nothing_to_answer(messages: list[Message]) -> None:
    validate_transcript(messages)
    with pytest.raises(TranscriptError, match="no user message to answer") as info:
        validate_transcript(messages, ready_for_model=True)
    assert info.value.index == 0


def test_error_attributes() -> None:
    error = assert_invalid([user(), user()], 1)
    assert error.index == 1
    assert error.reason == "two user messages in a row (roles must alternate)"
    assert str(error) == f"invalid transcript at index 1: {error.reason}"


# -- valid transcripts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "order",
    [("c1", "c2", "c3"), ("c3", "c2", "c1"), ("c2", "c3", "c1")],
)
def test_results_in_any_order(order: tuple[str, ...]) -> None:
    messages = [sys_(), user(), asst("x", "c1", "c2", "c3"), *map(result, order), asst("done")]
    validate_transcript(messages)
    validate_transcript(messages[:-1], ready_for_model=True)


def test_user_after_tool_results_steering() -> None:
    messages = [user(), asst("x", "c1"), result("c1"), user("steer"), asst("ok")]
    validate_transcript(messages)
    validate_transcript(messages[:-1], ready_for_model=True)


def test_assistant_after_tool_results() -> None:
    messages = [
        user(),
        asst("x", "c1"),
        result("c1"),
        asst("y", "c2"),
        result("c2"),
        asst("done"),
        user("next"),
    ]
    validate_transcript(messages, ready_for_model=True)


def test_no_system_message_is_fine() -> None:
    validate_transcript([user(), asst(), user()], ready_for_model=True)


def test_validate_does_not_filter_or_merge() -> None:
    """validate_transcript checks what is sent: an error reply still counts as an assistant."""
    messages = [user(), asst("boom", stop="error"), asst("ok")]
    assert_invalid(messages, 2, "two assistant messages")


# -- ModelView -------------------------------------------------------------------------------


def test_view_drops_aborted_and_error_assistants() -> None:
    aborted = asst("partial", "c9", stop="aborted")
    failed = asst("", stop="error")
    messages = [sys_(), user("a"), aborted, user("b"), failed, user("c"), asst("fine")]
    view = ModelView(messages)
    assert aborted not in view.messages
    assert failed not in view.messages
    assert [m.role for m in view.messages] == ["system", "user", "assistant"]
    assert view.messages[1].content == "a\n\nb\n\nc"
    assert view.messages[-1].content == "fine"


def test_view_drops_aborted_call_without_results() -> None:
    """An aborted message's tool calls need no results in the view."""
    messages = [user("a"), asst("partial", "c1", stop="aborted"), user("b")]
    view = ModelView(messages)
    view.check_ready()
    assert [m.role for m in view.messages] == ["user"]


def test_view_keeps_length_stop() -> None:
    truncated = asst("cut", "c1", stop="length")
    view = ModelView([user(), truncated, result("c1")])
    assert view.messages[1] is truncated
    view.check_ready()


def test_view_merges_str_and_str() -> None:
    view = ModelView([user("first"), user("second")])
    assert len(view.messages) == 1
    assert view.messages[0].content == "first\n\nsecond"
    assert isinstance(view.messages[0], UserMessage)
    view.check_ready()


def test_view_merges_str_and_parts() -> None:
    image = ImagePart(image_url=ImageUrl(url="data:image/png;base64,AA"))
    parts = UserMessage(content=(TextPart(text="look"), image))
    view = ModelView([user("first"), parts])
    assert view.messages[0].content == (TextPart(text="first"), TextPart(text="look"), image)
    view2 = ModelView([parts, user("then")])
    assert view2.messages[0].content == (TextPart(text="look"), image, TextPart(text="then"))


def test_view_merge_does_not_touch_the_originals() -> None:
    first, second = user("first"), user("second")
    transcript = [first, second]
    ModelView(transcript)
    assert first.content == "first"
    assert transcript == [first, second]


def test_view_error_names_the_full_transcript_index() -> None:
    """Indexes in view errors are those of the full transcript, not of the filtered view."""
    messages = [
        user(),
        asst("x", stop="error"),
        user(),
        asst("ok"),
        asst("again"),
    ]
    with pytest.raises(TranscriptError) as info:
        ModelView(messages)
    assert info.value.index == 4


def test_view_start_index() -> None:
    with pytest.raises(TranscriptError) as info:
        ModelView([user(), asst(), asst()], start_index=10)
    assert info.value.index == 12


def test_view_check_ready() -> None:
    view = ModelView([user(), asst()])
    with pytest.raises(TranscriptError, match="ends with an assistant message"):
        view.check_ready()
    view.append(user("more"), 2)
    view.check_ready()
    view.append(asst("x", "c1", "c2"), 3)
    with pytest.raises(TranscriptError, match=re.escape("(missing: c1, c2)")) as info:
        view.check_ready()
    assert info.value.index == 3
    view.append(result("c2"), 4)
    view.append(result("c1"), 5)
    view.check_ready()


def _transcript() -> list[Message]:
    return [
        sys_(),
        user("q"),
        asst("thinking", "c1", "c2"),
        result("c2"),
        result("c1"),
        user("steer"),
        asst("partial", "c3", stop="aborted"),
        user("again"),
        user("and again"),
        asst("", stop="error"),
        user("once more"),
        asst("calls", "c4"),
        result("c4"),
        asst("final"),
        user("next question"),
    ]


def test_incremental_appends_equal_a_fresh_view() -> None:
    messages = _transcript()
    incremental = ModelView()
    for index, message in enumerate(messages):
        incremental.append(message, index)
        fresh = ModelView(messages[: index + 1])
        assert incremental.messages == fresh.messages, f"after index {index}"
    incremental.check_ready()
    assert [m.role for m in incremental.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert incremental.messages[5].content == "steer\n\nagain\n\nand again\n\nonce more"
    # the sent form passes the strict check
    validate_transcript(incremental.messages, ready_for_model=True)


def test_incremental_error_equals_fresh_error() -> None:
    messages = [*_transcript(), asst("a"), asst("b")]
    incremental = ModelView()
    for index, message in enumerate(messages[:-1]):
        incremental.append(message, index)
    with pytest.raises(TranscriptError) as inc:
        incremental.append(messages[-1], len(messages) - 1)
    with pytest.raises(TranscriptError) as fresh:
        ModelView(messages)
    assert inc.value.index == fresh.value.index == len(messages) - 1
    assert str(inc.value) == str(fresh.value)
