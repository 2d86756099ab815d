"""Repair on load: a real SQLite file made hostile by raw SQL (rows that do not parse, bad
UTF-8, JSON escapes of lone surrogates, broken alternation, a result without its call,
duplicate call ids) is resumed, the user is told what was repaired, and the next prompt
completes over real loopback HTTP with a transcript a provider accepts."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from store_backend import Backend

from mibyan_jupyter.core import AssistantMessage, FunctionCall, ToolCall, ToolMessage, UserMessage
from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.core.transcript import TranscriptError, check_history, validate_transcript
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.store.records import append_message, load_messages
from mibyan_jupyter.store.repair import MISSING_PROMPT, RepairReport, repair_transcript
from mibyan_jupyter.store.resume import load_history, resume_agent, take_repair_report
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    provider = ProviderClient()
    provider.register("main", fake_model(fake_provider))
    yield provider
    await provider.aclose()


def call(call_id: str, name: str = "run_python") -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments='{"code": "1"}'))


CONVERSATION: list[Message] = [
    UserMessage(content="first question"),
    AssistantMessage(content="Let me look.", tool_calls=(call("c1"),), stop_reason="tool_use"),
    ToolMessage(tool_call_id="c1", name="run_python", content="1"),
    AssistantMessage(content="It is 1."),
    UserMessage(content="second question"),
    AssistantMessage(content="Second answer."),
]


def stored(store: SessionStore, messages: list[Message] = CONVERSATION) -> str:
    info = store.create(model="main", config={"system_prompt": "be brief"})
    for message in messages:
        append_message(store.db, info.id, message)
    return info.id


def sql(store: SessionStore, statement: str, *params: Any) -> None:
    with store.db.transaction() as conn:
        conn.execute(statement, params)


async def next_prompt_completes(
    store: SessionStore, session: str, client: ProviderClient, server: FakeProviderServer
) -> RepairReport | None:
    """Resume, prompt over HTTP, and check what the provider was sent."""
    agent, _ = resume_agent(store, session, stream_fn=client)
    report = take_repair_report(agent)
    assert take_repair_report(agent) is None  # told once
    server.push(FakeReply("carried on"))
    await agent.prompt("and now?")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == "carried on", last.error_message
    body = server.requests[-1].body
    assert body is not None
    roles = [m["role"] for m in body["messages"]]
    assert roles[0] == "system"
    assert roles[-1] == "user"
    for before, after in itertools.pairwise(roles[1:]):
        assert not (before == after == "assistant"), roles
    json.dumps(body, ensure_ascii=False).encode()  # no lone surrogate reached the wire
    return report


def test_a_clean_session_needs_no_repair(store: SessionStore) -> None:
    session = stored(store)
    history = load_history(store, session)
    assert history.messages == CONVERSATION
    assert not history.repairs
    assert history.repairs.lines() == []


async def test_a_row_that_does_not_parse_is_rebuilt_from_its_columns(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    session = stored(store)
    sql(store, 'UPDATE messages SET data = \'{"role": "user", "cont\' WHERE seq = 4')
    sql(store, "UPDATE messages SET data = 'not json' WHERE seq = 1")
    messages = load_messages(store.db, session)  # display reads it too, never refused
    assert messages[4] == UserMessage(content="second question", timestamp=messages[4].timestamp)
    rebuilt = messages[1]
    assert isinstance(rebuilt, AssistantMessage)
    assert rebuilt.content == "Let me look."
    assert [c.id for c in rebuilt.tool_calls] == ["c1"]
    report = await next_prompt_completes(store, session, client, fake_provider)
    assert report is not None
    assert report.counts == {"rebuilt": 2}
    assert report.lines() == [
        "2 stored message(s) could not be read: rebuilt from their search text"
    ]


async def test_bad_utf8_and_lone_surrogates_are_replaced(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    session = stored(store)
    escaped = json.dumps({"role": "user", "content": "file \udcff.txt"})  # an older writer
    assert "\\udcff" in escaped
    sql(store, "UPDATE messages SET data = ? WHERE seq = 4", escaped)
    if not store.db.dialect.is_postgres:  # PostgreSQL's text cannot hold invalid UTF-8
        bad_bytes = b'{"role":"tool","tool_call_id":"c1","name":"run_python","content":"caf\xff \xed\xb3\xbf"}'
        sql(store, "UPDATE messages SET data = CAST(? AS TEXT) WHERE seq = 2", bad_bytes)
        sql(store, "UPDATE messages SET text = CAST(? AS TEXT) WHERE seq = 4", b"file \xff.txt")
    history = load_history(store, session)
    assert history.repairs.counts == {"text": 1 if store.db.dialect.is_postgres else 2}
    assert "U+FFFD" in history.repairs.lines()[0]
    if not store.db.dialect.is_postgres:
        assert history.messages[2].content == "caf\ufffd \ufffd\ufffd\ufffd"
    assert history.messages[4].content == "file \ufffd.txt"
    await next_prompt_completes(store, session, client, fake_provider)


async def test_a_result_without_its_call_and_broken_alternation(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    session = stored(store)
    sql(store, "DELETE FROM messages WHERE seq = 1")  # the call: its result is an orphan
    sql(store, "DELETE FROM messages WHERE seq = 4")  # a prompt: two replies in a row
    with pytest.raises(TranscriptError, match="does not follow an assistant tool call"):
        check_history(load_messages(store.db, session))
    history = load_history(store, session)
    assert history.repairs.counts == {"orphan_result": 1, "merged": 1}
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.messages[1].content == "It is 1.\n\nSecond answer."
    report = await next_prompt_completes(store, session, client, fake_provider)
    assert report is not None
    assert len(report.lines()) == 2  # one line per kind


async def test_a_lost_first_prompt_gets_a_placeholder(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    session = stored(store)
    sql(store, "DELETE FROM messages WHERE seq = 0")
    history = load_history(store, session)
    assert history.messages[0] == UserMessage(
        content=MISSING_PROMPT, timestamp=history.messages[0].timestamp
    )
    assert history.repairs.counts == {"missing_user": 1}
    await next_prompt_completes(store, session, client, fake_provider)


async def test_duplicate_call_ids_stored_by_an_older_version_are_made_unique(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    twice = AssistantMessage(tool_calls=(call("call_0"), call("call_0")), stop_reason="tool_use")
    session = stored(
        store,
        [
            UserMessage(content="go"),
            twice,
            ToolMessage(tool_call_id="call_0", name="run_python", content="first"),
            ToolMessage(tool_call_id="call_0", name="run_python", content="second"),
        ],
    )
    history = load_history(store, session)
    assert history.repairs.counts == {"duplicate_call_id": 1}
    batch = history.messages[1]
    assert isinstance(batch, AssistantMessage)
    assert [c.id for c in batch.tool_calls] == ["call_0", "call_0-2"]
    results = [(m.tool_call_id, m.content) for m in history.messages[2:]]
    assert results == [("call_0", "first"), ("call_0-2", "second")]
    await next_prompt_completes(store, session, client, fake_provider)


def test_every_kind_at_once_still_resumes(store: SessionStore) -> None:
    """Damage of every kind in one file: loaded, repaired, valid, reported per kind."""
    session = stored(store, [*CONVERSATION, *CONVERSATION])
    sql(store, "DELETE FROM messages WHERE seq IN (0, 7)")
    sql(
        store,
        "UPDATE messages SET data = 'garbage', role = 'tool', tool_call_id = NULL WHERE seq = 9",
    )
    if store.db.dialect.is_postgres:  # its text holds no invalid UTF-8: a lone surrogate
        sql(
            store,
            "UPDATE messages SET data = ? WHERE seq = 10",
            '{"role":"user","content":"\\udcff"}',
        )
    else:
        sql(
            store,
            "UPDATE messages SET data = CAST(? AS TEXT) WHERE seq = 10",
            b'{"role":"user","content":"\xc3"}',
        )
    history = load_history(store, session)
    check_history(history.messages)
    assert set(history.repairs.counts) >= {"missing_user", "orphan_result", "dropped", "text"}
    assert len(history.repairs.lines()) == len(history.repairs.counts)
    again = load_history(store, session)
    assert again.messages == history.messages  # deterministic: nothing was written back


def test_repair_is_idempotent_and_a_valid_transcript_is_untouched() -> None:
    repaired, report = repair_transcript(CONVERSATION)
    assert repaired == CONVERSATION
    assert not report
    validate_transcript(repaired)
