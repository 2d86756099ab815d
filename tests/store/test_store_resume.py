"""Resume: transcript repair, compression lineage, pending approvals and a resumed Agent."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest
from store_backend import Backend

from mibyan_jupyter.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ModelView,
    Reply,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.events import AgentEvent, MessageEnd
from mibyan_jupyter.core.transcript import TranscriptError, check_history
from mibyan_jupyter.store.db import StoreError
from mibyan_jupyter.store.records import append_message, insert_session, load_messages
from mibyan_jupyter.store.resume import (
    NOT_RUN,
    UNKNOWN_OUTCOME,
    load_transcript,
    pending_approvals,
    repair,
    resume_agent,
)
from mibyan_jupyter.store.sessions import SessionStore


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage(
        content=None,
        tool_calls=tuple(
            ToolCall(id=i, function=FunctionCall(name=f"tool_{i}", arguments="{}")) for i in ids
        ),
        stop_reason="tool_use",
    )


def result(call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(tool_call_id=call_id, name=f"tool_{call_id}", content=text)


def synthetic(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [
        (m.tool_call_id, str(m.content))
        for m in messages
        if isinstance(m, ToolMessage) and m.details and m.details.get("synthetic")
    ]


# -- repair -----------------------------------------------------------------------------------


def test_orphan_calls_in_the_middle_and_at_the_end() -> None:
    batch = calls("a", "b", "c")
    last = calls("d", "e")
    transcript: list[Message] = [
        SystemMessage(content="sys"),
        UserMessage(content="go"),
        batch,
        result("b"),  # a and c never got a result: the kernel died mid-batch
        UserMessage(content="what happened?"),  # a later run went on regardless
        AssistantMessage(content="not sure"),
        UserMessage(content="again"),
        last,  # died before any result
    ]
    with pytest.raises(TranscriptError):
        check_history(transcript)
    repaired = repair(transcript)
    check_history(repaired)
    ModelView(repaired).check_ready()  # a model call may follow
    assert [type(m).__name__ for m in repaired[2:6]] == [
        "AssistantMessage",
        "ToolMessage",
        "ToolMessage",
        "ToolMessage",
    ]
    assert repaired[3] is transcript[3]  # the real result stays first, in place
    assert synthetic(repaired) == [(i, UNKNOWN_OUTCOME) for i in ("a", "c", "d", "e")]
    added = [m for m in repaired if m not in transcript]
    assert all(isinstance(m, ToolMessage) and m.is_error for m in added)
    assert [m.name for m in added if isinstance(m, ToolMessage)] == [
        "tool_a",
        "tool_c",
        "tool_d",
        "tool_e",
    ]
    assert "may or may not have run" in UNKNOWN_OUTCOME
    assert repair(repaired) == repaired  # idempotent
    assert repair(transcript) == repaired  # deterministic: same place, same message


def test_aborted_partials_are_kept_but_not_sent() -> None:
    aborted = AssistantMessage(
        content="Let me ca",
        tool_calls=calls("x").tool_calls,  # a partial call: never ran, needs no result
        stop_reason="aborted",
        error_message="the run was interrupted",
    )
    failed = AssistantMessage(stop_reason="error", error_message="HTTP 500")
    transcript: list[Message] = [
        UserMessage(content="hi"),
        aborted,
        UserMessage(content="try again"),
        failed,
        UserMessage(content="once more"),
        AssistantMessage(content="hello"),
    ]
    repaired = repair(transcript)
    assert repaired == transcript  # nothing to add: kept for display as they are
    view = ModelView(repaired).messages
    assert aborted not in view
    assert failed not in view
    assert [m.role for m in view] == ["user", "assistant"]  # the three prompts merged
    check_history(repaired)


def test_stray_and_duplicate_results_are_dropped() -> None:
    transcript: list[Message] = [
        UserMessage(content="go"),
        calls("a"),
        result("a"),
        result("a", "again"),  # duplicate
        result("zz"),  # answers nothing
        AssistantMessage(content="done"),
    ]
    repaired = repair(transcript)
    assert repaired == [transcript[0], transcript[1], transcript[2], transcript[5]]
    check_history(repaired)


def test_calls_awaiting_approval_are_said_not_to_have_run() -> None:
    transcript: list[Message] = [UserMessage(content="go"), calls("a", "b")]
    repaired = repair(transcript, not_run={"b"})
    assert synthetic(repaired) == [("a", UNKNOWN_OUTCOME), ("b", NOT_RUN)]
    check_history(repaired)


# -- loading from the store -------------------------------------------------------------------


def test_fork_inside_a_tool_batch_resumes(store: SessionStore) -> None:
    sid = store.create(model="scripted").id
    for message in (UserMessage(content="go"), calls("a", "b"), result("a"), result("b")):
        append_message(store.db, sid, message)
    fork = store.fork(sid, at=3)  # keeps a's result, cuts b's
    with pytest.raises(TranscriptError):
        check_history(load_transcript(store, fork.id))
    agent, info = resume_agent(store, fork.id, stream_fn=ScriptedModel())
    assert info.id == fork.id
    assert synthetic(agent.state.messages) == [("b", UNKNOWN_OUTCOME)]


def test_compression_lineage_resolves_to_the_newest_descendant(store: SessionStore) -> None:
    root = store.create(model="m").id
    append_message(store.db, root, UserMessage(content="long history"))
    append_message(store.db, root, AssistantMessage(content="ok"))
    child = insert_session(store.db, parent_id=root, link_kind="compression", model="m")
    append_message(store.db, child, UserMessage(content="summary of the long history"))
    append_message(store.db, child, AssistantMessage(content="noted"))
    store.fork(child)  # a fork is not a continuation
    assert load_transcript(store, root) == load_messages(store.db, child)
    agent, info = resume_agent(store, root[:8], stream_fn=ScriptedModel())
    assert info.id == child
    assert agent.state.messages == load_messages(store.db, child)


def test_pending_approvals(store: SessionStore) -> None:
    sid = store.create().id
    for message in (UserMessage(content="go"), calls("a", "b", "c"), result("c")):
        append_message(store.db, sid, message)
    now = time.time()
    with store.db.transaction() as conn:
        for call_id, status, asked in (
            ("a", "awaiting_approval", now + 1),
            ("b", "awaiting_approval", now),
            ("c", "awaiting_approval", now),  # has a result: no longer pending
        ):
            conn.execute(
                "INSERT INTO tool_calls (session_id, call_id, name, arguments, status, reason,"
                " requested_at, started_at) VALUES (?, ?, ?, '{\"x\": 1}', ?, 'side effects', ?, ?)",
                (sid, call_id, f"tool_{call_id}", status, asked, now),
            )
    pending = pending_approvals(store, sid)
    assert [(p.call_id, p.name, p.arguments, p.reason) for p in pending] == [
        ("b", "tool_b", '{"x": 1}', "side effects"),
        ("a", "tool_a", '{"x": 1}', "side effects"),
    ]
    agent, _ = resume_agent(store, sid, stream_fn=ScriptedModel())
    assert synthetic(agent.state.messages) == [("a", NOT_RUN), ("b", NOT_RUN)]
    assert len(pending_approvals(store, sid)) == 2  # resuming decides nothing


# -- a resumed agent --------------------------------------------------------------------------


async def test_resume_last_and_continue(store: SessionStore) -> None:
    old = store.create(notebook_path="a.ipynb").id
    append_message(store.db, old, UserMessage(content="old"))
    sid = store.create(
        model="scripted-model", notebook_path="b.ipynb", config={"system_prompt": "Be terse."}
    ).id
    for message in (UserMessage(content="compute"), calls("a", "b"), result("a", "42")):
        append_message(store.db, sid, message)  # the kernel died while b ran
    model = ScriptedModel([Reply("b may not have run; a gave 42")])
    agent, info = resume_agent(store, "last", stream_fn=model)
    assert (info.id, agent.state.model, agent.state.system_prompt) == (
        sid,
        "scripted-model",
        "Be terse.",
    )
    written: list[Message] = []

    def writer(event: AgentEvent) -> None:  # the real writer is a subscriber like this one
        if isinstance(event, MessageEnd):
            append_message(store.db, sid, event.message)
            written.append(event.message)

    agent.subscribe(writer)
    await agent.continue_()  # from the repaired tool results
    request = model.requests[0]
    assert request.system_prompt == "Be terse."
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "tool"]
    assert synthetic(request.messages) == [("b", UNKNOWN_OUTCOME)]
    assert [m.role for m in written] == ["assistant"]
    stored = load_messages(store.db, sid)
    assert synthetic(stored) == []  # the repair is not written back ...
    again, _ = resume_agent(store, sid, stream_fn=ScriptedModel())
    assert again.state.messages == agent.state.messages  # ... and finds the same place
    other, info = resume_agent(
        store, "last", stream_fn=ScriptedModel(), notebook_path="a.ipynb", model="override"
    )
    assert (info.id, other.state.model, other.state.system_prompt) == (old, "override", "")
    with pytest.raises(StoreError, match=r"no session to resume for c\.ipynb"):
        resume_agent(store, "last", stream_fn=ScriptedModel(), notebook_path="c.ipynb")
