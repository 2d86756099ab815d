"""The store writer as a subscriber of a real Agent, on a real database file.

One scripted run covers every kind of row: text, thinking, parallel tool calls with an
approval asked of a user (approved and denied) and one decided by policy, a retry and a
fallback notice, and a failed reply. The rows must match the agent's own transcript, and
the session status must follow the run as it happens. A store that fails (closed under
the writer, disk full, locked for too long) must not break the run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from store_backend import Backend
from support import check_each_run

from mibyan_jupyter.core import (
    AbortSignal,
    Agent,
    AgentEvent,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalRule,
    Approved,
    AssistantMessage,
    Call,
    Decision,
    Denied,
    FallbackNotice,
    Reply,
    RetryNotice,
    ScriptedModel,
    Usage,
    tool,
)
from mibyan_jupyter.core.stream import ModelRequest, StreamEvent, StreamFn
from mibyan_jupyter.core.tools import CANCELLED
from mibyan_jupyter.store.backend import open_database
from mibyan_jupyter.store.conn import Conn, StoreDatabase
from mibyan_jupyter.store.db import Database, StoreError
from mibyan_jupyter.store.records import insert_session, load_messages
from mibyan_jupyter.store.writer import StoreWriter, provider_label

MODEL = "fake:scripted-model"


@tool(side_effects=False)
async def read(path: str) -> str:
    """Read a file.

    Args:
        path: which file.
    """
    await asyncio.sleep(0.01)
    return f"contents of {path}"


@tool
def write(path: str, text: str = "") -> str:
    """Write a file.

    Args:
        path: which file.
        text: what to write.
    """
    return f"wrote {len(text)} characters to {path}"


@tool
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: which file.
    """
    raise AssertionError("a policy denies delete; it never runs")


@tool
async def slow(seconds: float) -> str:
    """Wait.

    Args:
        seconds: how long.
    """
    await asyncio.sleep(seconds)
    return "waited"


@pytest.fixture
def db(backend: Backend) -> Iterator[StoreDatabase]:
    database = open_database(backend.target)
    yield database
    database.close()


@pytest.fixture
def reader(backend: Backend, db: StoreDatabase) -> Iterator[Conn]:
    """A second connection, as another kernel (or `%agent list`) would see the store."""
    other = open_database(backend.target)
    yield other.conn
    other.close()


def with_notices(model: StreamFn, notices: dict[int, Sequence[StreamEvent]]) -> StreamFn:
    """Wraps a stream function: before model call number ``n`` (from 0), the notices given
    for it are streamed, with a pause after each as a provider backing off would take."""
    calls = 0

    async def stream(request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        nonlocal calls
        number, calls = calls, calls + 1
        for notice in notices.get(number, ()):
            yield notice
            await asyncio.sleep(0.02)
        inner = model(request, signal)
        assert not asyncio.iscoroutine(inner)
        async for event in inner:  # type: ignore[union-attr]
            yield event

    return stream


class StatusProbe:
    """Subscribed after the writer: reads the session's status from another connection
    when chosen events arrive, so what the file says at each moment can be asserted."""

    def __init__(self, reader: Conn, session_id: str) -> None:
        self.reader = reader
        self.session_id = session_id
        self.seen: list[tuple[str, str]] = []

    def status(self) -> str:
        row = self.reader.execute(
            "SELECT status FROM sessions WHERE id = ?", (self.session_id,)
        ).fetchone()
        return str(row[0])

    def __call__(self, event: AgentEvent) -> None:
        if event.type in ("agent_start", "approval_requested", "approval_resolved", "agent_end"):
            self.seen.append((event.type, self.status()))


class UserAtTheButtons:
    """An approver that answers after a while, checking meanwhile that the file shows the
    pending approval (the tool row and the session status)."""

    def __init__(self, probe: StatusProbe, *answers: Decision) -> None:
        self.probe = probe
        self.answers = list(answers)
        self.pending: list[tuple[str, str, str, bool]] = []
        self.asked = 0

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        # A batch's questions are open at once: answer them 40 ms apart, in the order
        # asked, so each decision is written before the next one is made.
        order, self.asked = self.asked, self.asked + 1
        await asyncio.sleep(0.02 + 0.04 * order)
        status, requested_at = self.probe.reader.execute(
            "SELECT status, requested_at FROM tool_calls WHERE call_id = ?", (request.call_id,)
        ).fetchone()
        self.pending.append(
            (request.call_id, self.probe.status(), status, requested_at is not None)
        )
        return self.answers.pop(0)


TOOL_COLUMNS = (
    "call_id",
    "status",
    "decision",
    "scope",
    "decided_by",
    "reason",
    "arguments",
    "requested_at",
    "decided_at",
    "started_at",
    "finished_at",
)


def tool_rows(reader: Conn) -> dict[str, dict[str, Any]]:
    rows = reader.execute(
        f"SELECT {', '.join(TOOL_COLUMNS)} FROM tool_calls ORDER BY started_at"
    ).fetchall()
    return {row[0]: dict(zip(TOOL_COLUMNS, row, strict=True)) for row in rows}


SCRIPT = [
    Reply(
        thinking="The user wants files handled; read two, write one, delete one.",
        text="Let me look at the files first.",
        calls=[
            Call("read", {"path": "a.txt"}, id="r1"),
            Call("write", {"path": "out.txt", "text": "hello"}, id="w1"),
            Call("delete", {"path": "a.txt"}, id="d1"),
            Call("write", {"path": "/etc/hosts", "text": "x"}, id="w2"),
            Call("read", {"path": "b.txt"}, id="r2"),
        ],
        usage=Usage(input=120, output=40, cache_read=20, reasoning=12, total=160, cost=0.0123),
    ),
    Reply(text="Done: read two files and wrote one.", usage=Usage(input=300, output=9)),
    Reply(error="the server is overloaded", usage=Usage(input=5)),
]


async def test_a_run_is_recorded_as_it_happens(
    db: StoreDatabase, reader: Conn, backend: Backend
) -> None:
    session_id = insert_session(db, title="", model=MODEL)
    probe = StatusProbe(reader, session_id)
    user = UserAtTheButtons(probe, Approved(), Denied("not that file", scope="session"))
    gate = ApprovalGate(
        ApprovalPolicy(rules=[ApprovalRule("delete", "deny", reason="deleting is never allowed")]),
        user,
    )
    notices: dict[int, Sequence[StreamEvent]] = {
        1: [
            RetryNotice(
                attempt=1, max_attempts=3, delay=0.0, error_kind="rate_limit", message="429"
            ),
            FallbackNotice(from_model=MODEL, to_model="fake:backup", reason="rate_limit"),
            RetryNotice(attempt=1, max_attempts=3, delay=0.0, error_kind="timeout", message="slow"),
        ]
    }
    model = ScriptedModel(SCRIPT, chunk_size=6, delay=0.001, name="scripted-model")
    agent = Agent(
        stream_fn=with_notices(model, notices),
        model=MODEL,
        tools=[read, write, delete],
        approval=gate,
    )
    writer = StoreWriter(db, session_id)
    events: list[AgentEvent] = []
    agent.subscribe(writer)
    agent.subscribe(probe)
    agent.subscribe(events.append)

    await agent.prompt("Tidy up the files")
    assert agent.state.last_end_reason == "completed"
    end_of_first_run = reader.execute(
        "SELECT status, end_reason, ended_at IS NOT NULL, owner_pid FROM sessions"
    ).fetchone()
    assert end_of_first_run == ("idle", "completed", 1, None)
    await agent.prompt("Once more")
    assert agent.state.last_end_reason == "error"
    check_each_run(events)
    assert writer.error is None

    # Messages: exactly the agent's transcript, in order, typed.
    messages = agent.state.messages
    roles = ["user", "assistant", *(["tool"] * 5), "assistant", "user", "assistant"]
    assert [m.role for m in messages] == roles
    rows = reader.execute(
        "SELECT seq, role, aborted, stop_reason FROM messages ORDER BY seq"
    ).fetchall()
    assert [(seq, role) for seq, role, _, _ in rows] == [
        (index, m.role) for index, m in enumerate(messages)
    ]
    assert [stop for *_, stop in rows if stop] == ["tool_use", "stop", "error"]
    assert load_messages(db, session_id) == messages
    assert writer.last_seq == len(messages) - 1
    first = messages[1]
    assert isinstance(first, AssistantMessage)
    assert first.thinking[0].text.startswith("The user wants")
    title = reader.execute("SELECT title FROM sessions").fetchone()[0]
    assert title == "Tidy up the files"

    # Tool calls: one row each, with the approval as decided and the outcome.
    calls = tool_rows(reader)
    assert list(calls) == ["r1", "w1", "d1", "w2", "r2"]
    assert {
        k: (v["status"], v["decision"], v["scope"], v["decided_by"]) for k, v in calls.items()
    } == {
        "r1": ("done", None, None, None),
        "w1": ("done", "approved", "once", "user"),
        "d1": ("error", "denied", "once", "policy"),
        "w2": ("error", "denied", "session", "user"),
        "r2": ("done", None, None, None),
    }
    assert calls["w1"]["arguments"] == '{"path": "out.txt", "text": "hello"}'
    assert calls["w2"]["reason"] == "not that file"
    assert calls["d1"]["reason"] == "deleting is never allowed"
    assert calls["d1"]["requested_at"] is None  # decided by policy: no one was asked
    for call_id in ("w1", "w2"):
        row = calls[call_id]
        assert row["started_at"] <= row["requested_at"] <= row["decided_at"] <= row["finished_at"]
    assert all(row["finished_at"] >= row["started_at"] for row in calls.values())

    # The approvals were visible in the file while the user was being asked.
    assert user.pending == [
        ("w1", "awaiting_approval", "awaiting_approval", True),
        ("w2", "awaiting_approval", "awaiting_approval", True),
    ]
    # A batch's questions are open at once: w1 asked, d1 denied by policy, w2 asked; the
    # session waits until the last open one (w2) is decided.
    assert probe.seen == [
        ("agent_start", "running"),
        ("approval_requested", "awaiting_approval"),
        ("approval_resolved", "awaiting_approval"),
        ("approval_requested", "awaiting_approval"),
        ("approval_resolved", "awaiting_approval"),
        ("approval_resolved", "running"),
        ("agent_end", "idle"),
        ("agent_start", "running"),
        ("agent_end", "idle"),
    ]
    final = reader.execute("SELECT status, end_reason, owner_pid FROM sessions").fetchone()
    assert final == ("idle", "error", None)

    # Usage: one ledger row per assistant message, with its call's retries and fallback.
    ledger = reader.execute(
        "SELECT message_seq, model, provider, api, input_tokens, output_tokens, cache_read,"
        " cache_write, reasoning, cost, retries, fallback_from, latency_ms FROM usage_ledger"
        " ORDER BY id"
    ).fetchall()
    assistant_seqs = [i for i, m in enumerate(messages) if m.role == "assistant"]
    assert [row[0] for row in ledger] == assistant_seqs == [1, 7, 9]
    assert [row[1:12] for row in ledger] == [
        ("scripted-model", "fake", "fake", 120, 40, 20, 0, 12, 0.0123, 0, None),
        ("scripted-model", "fake", "fake", 300, 9, 0, 0, 0, None, 2, MODEL),
        ("scripted-model", "fake", "fake", 5, 0, 0, 0, 0, None, 0, None),
    ]
    latencies = [row[12] for row in ledger]
    assert all(latency > 0 for latency in latencies)
    assert latencies[1] >= 3 * 20  # the retries' pauses count: the user waited for them

    # Every stored message is in the full-text index once the run has ended.
    if backend.is_postgres:  # a generated tsvector column: indexed with each row
        hits = reader.execute(
            "SELECT count(*) FROM messages WHERE tsv @@ to_tsquery('simple', 'files')"
        ).fetchone()[0]
        assert hits >= 2
        return
    indexed, newest = reader.execute(
        "SELECT (SELECT indexed_upto FROM fts_state), (SELECT max(id) FROM messages)"
    ).fetchone()
    assert indexed == newest
    hits = reader.execute(
        "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'files'"
    ).fetchone()[0]
    assert hits >= 2


async def test_a_cancelled_tool_call_is_recorded_as_cancelled(
    db: StoreDatabase, reader: Conn
) -> None:
    session_id = insert_session(db, model=MODEL)
    model = ScriptedModel([Reply(calls=[Call("slow", {"seconds": 30}, id="s1")]), "unused"])
    agent = Agent(stream_fn=model, model=MODEL, tools=[slow])
    writer = StoreWriter(db, session_id)
    agent.subscribe(writer)
    running = asyncio.Event()
    agent.subscribe(lambda event: running.set() if event.type == "tool_execution_start" else None)

    async def stop_when_running() -> None:
        await running.wait()
        await asyncio.sleep(0.02)
        agent.abort()

    await asyncio.gather(agent.prompt("wait a long time"), stop_when_running())
    assert writer.error is None
    assert agent.state.last_end_reason == "aborted"
    row = tool_rows(reader)["s1"]
    assert row["status"] == "cancelled"
    assert row["finished_at"] is not None
    assert load_messages(db, session_id) == agent.state.messages
    assert load_messages(db, session_id)[-1].content == CANCELLED  # type: ignore[union-attr]
    assert reader.execute("SELECT status, end_reason FROM sessions").fetchone() == (
        "idle",
        "aborted",
    )


def test_provider_label() -> None:
    assert provider_label("openai:gpt-4.1-mini") == "openai"
    assert provider_label("ollama:llama3.1:8b") == "ollama"
    assert provider_label("gpt-4.1-mini") is None
    assert provider_label(None) is None


def test_the_session_must_exist(db: StoreDatabase) -> None:
    with pytest.raises(StoreError, match="no session 'nope'"):
        StoreWriter(db, "nope")


def test_the_model_for_the_ledger_defaults_to_the_session_row(db: StoreDatabase) -> None:
    assert StoreWriter(db, insert_session(db, model="anthropic:claude-x")).model == (
        "anthropic:claude-x"
    )
    assert StoreWriter(db, insert_session(db), model="openai:gpt-5").model == "openai:gpt-5"


# -- a store that fails must not break the run ----------------------------------------------

TOOL_RUN = [
    Reply(text="Reading.", calls=[Call("read", {"path": "a.txt"}, id="r1")]),
    Reply(text="x" * 20_000),  # large enough to need new pages
    "The end.",
]


async def run_with_writer(
    db: StoreDatabase,
    session_id: str,
    replies: list[Reply | str],
    sabotage: Callable[[], None] | None = None,
) -> tuple[Agent, StoreWriter]:
    """Run with a writer subscribed; ``sabotage`` breaks the store once it is."""
    agent = Agent(stream_fn=ScriptedModel(replies), model=MODEL, tools=[read])
    writer = StoreWriter(db, session_id)
    agent.subscribe(writer)
    if sabotage is not None:
        sabotage()
    await agent.prompt("go")
    return agent, writer


def writer_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mibyan_jupyter.store.writer"]


async def test_a_database_closed_under_the_writer(
    db: StoreDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    session_id = insert_session(db, model=MODEL)
    with caplog.at_level(logging.ERROR):
        agent, writer = await run_with_writer(db, session_id, TOOL_RUN, sabotage=db.close)
    assert agent.state.last_end_reason == "completed"
    assert [m.role for m in agent.state.messages][-1] == "assistant"
    assert isinstance(writer.error, StoreError)
    assert str(db.path) in str(writer.error)
    assert "closed" in str(writer.error)
    assert len(writer_logs(caplog)) == 1  # logged once, not once per event
    assert session_id in writer_logs(caplog)[0].getMessage()


async def test_a_full_disk_leaves_a_valid_prefix_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Database(tmp_path / "sessions.sqlite3") as db:  # SQLite's file itself
        await full_disk_run(db, caplog)


async def full_disk_run(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    session_id = insert_session(db, model=MODEL)
    # SQLite's own size cap fails writes exactly as a full disk does (SQLITE_FULL).
    pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
    db.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with caplog.at_level(logging.ERROR):
        agent, writer = await run_with_writer(db, session_id, TOOL_RUN)
    assert agent.state.last_end_reason == "completed"
    assert writer.error is not None
    assert "full" in str(writer.error)
    assert len(writer_logs(caplog)) == 1
    stored = load_messages(db, session_id)
    # Everything up to the message that did not fit, and nothing after it: a prefix.
    assert 0 < len(stored) < len(agent.state.messages)
    assert stored == agent.state.messages[: len(stored)]
    assert writer.last_seq == len(stored) - 1
    reader = sqlite3.connect(db.path)
    assert reader.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reader.close()


async def test_a_lock_held_beyond_the_retry_window(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "locked.sqlite3"
    with Database(path) as setup:
        session_id = insert_session(setup, model=MODEL)
    other_kernel = sqlite3.connect(path, isolation_level=None)
    with Database(path, busy_timeout=0.02, lock_retry_seconds=0.1) as db:
        other_kernel.execute("BEGIN IMMEDIATE")
        try:
            with caplog.at_level(logging.ERROR):
                agent, writer = await run_with_writer(db, session_id, ["Hello."])
        finally:
            other_kernel.execute("ROLLBACK")
            other_kernel.close()
        assert agent.state.last_end_reason == "completed"
        assert writer.error is not None
        assert "locked" in str(writer.error)
        assert len(writer_logs(caplog)) == 1


async def test_no_secret_from_the_environment_reaches_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_provider: Any
) -> None:
    """A key in the environment travels with every request, and the fake server echoes it
    in an error message, as real APIs do for a wrong key; none of it may be stored."""
    from mibyan_jupyter.providers.client import ProviderClient
    from mibyan_jupyter.providers.retry import RetryPolicy
    from mibyan_jupyter.testing import FakeReply, Fault, fake_model

    secret = "sk-mibyan-test-0123456789abcdef"
    monkeypatch.setenv("MIBYAN_TEST_PROVIDER_KEY", secret)
    fake_provider.push(
        FakeReply("Hello there."),
        Fault("status", status=401, message=f"Incorrect API key provided: {secret}"),
    )
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register(
        "main",
        fake_model(fake_provider, "main-model", key_env="MIBYAN_TEST_PROVIDER_KEY"),
    )
    path = tmp_path / "sessions.sqlite3"
    try:
        with Database(path) as db:
            session_id = insert_session(db, model="main", config={"temperature": 0})
            agent = Agent(stream_fn=client, model="main")
            writer = StoreWriter(db, session_id)
            agent.subscribe(writer)
            await agent.prompt("hi")
            await agent.prompt("again")
            assert writer.error is None
            failed = agent.state.messages[-1]
            assert isinstance(failed, AssistantMessage)
            assert failed.stop_reason == "error"
            assert "Incorrect API key" in (failed.error_message or "")
            assert fake_provider.requests[0].headers.get("authorization") == f"Bearer {secret}"
    finally:
        await client.aclose()
    assert_not_in_files(path, secret)


def assert_not_in_files(path: Path, secret: str) -> None:
    """Neither the database nor a -wal / -shm file beside it holds ``secret``."""
    files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
    assert path in files
    for file in files:
        assert secret.encode() not in file.read_bytes(), file.name


@tool(side_effects=False)
def getenv(name: str) -> str:
    """Read an environment variable.

    Args:
        name: the variable.
    """
    return os.environ[name]


async def test_a_secret_echoed_anywhere_in_a_run_is_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key reaches the prompt's first line (the title), the model's text and a tool
    call's arguments, a tool result and an approval reason: all of it is stored
    redacted."""
    secret = "sk-proj-mibyan-writer-test-0123456789"
    monkeypatch.setenv("MIBYAN_WRITER_TEST_API_KEY", secret)
    replies: list[Reply | str] = [
        Reply(
            text=f"Your key is {secret}; checking it.",
            calls=[
                Call("getenv", {"name": "MIBYAN_WRITER_TEST_API_KEY"}, id="g1"),
                Call("write", {"path": "key.txt", "text": secret}, id="w1"),
            ],
        ),
        f"Done with {secret}.",
    ]

    async def deny(request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return Denied(f"do not write {secret} to disk")

    path = tmp_path / "sessions.sqlite3"
    with Database(path) as db:
        session_id = insert_session(db, model=MODEL)
        agent = Agent(
            stream_fn=ScriptedModel(replies),
            model=MODEL,
            tools=[getenv, write],
            approval=ApprovalGate(approver=deny),
        )
        writer = StoreWriter(db, session_id)
        agent.subscribe(writer)
        await agent.prompt(f"Check my key {secret} please")
        assert writer.error is None
        assert secret in str(agent.state.messages[3].content)  # the tool really returned it
        stored = load_messages(db, session_id)
        assert len(stored) == len(agent.state.messages)
        assert "[redacted]" in str(stored[0].content)
    assert_not_in_files(path, secret)
