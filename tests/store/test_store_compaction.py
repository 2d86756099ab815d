"""A compaction continues the session in a child: the store writer opens it (parent id,
``link_kind='compression'``, the compacted transcript as its first messages), moves the
lease there and writes on there; resume follows it; the lineage keeps the whole history.
Real SQLite files and the team store; events as the loop emits them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from store_backend import Backend

from mibyan_jupyter.core.events import AgentEnd, AgentStart, MessageEnd
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.core.notices import CompactionNotice
from mibyan_jupyter.store.lease import Lease, LeaseKeeper
from mibyan_jupyter.store.lineage import lineage_messages
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.store.writer import StoreWriter


def conversation(turns: int) -> list[Message]:
    out: list[Message] = [UserMessage(content="Analyse sales.csv", timestamp=1.0)]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", function=FunctionCall(name="read", arguments="{}"))
        out.append(AssistantMessage(content=f"step {i}", tool_calls=(call,), timestamp=2.0))
        out.append(ToolMessage(tool_call_id=f"c{i}", name="read", content=f"r{i}", timestamp=3.0))
    return out


def compacted(messages: list[Message]) -> tuple[Message, ...]:
    summary = UserMessage(content="[Summary] goal: sales", timestamp=4.0)
    return (messages[0], summary, *messages[-2:])


async def feed(writer: StoreWriter, messages: Sequence[Message]) -> None:
    for message in messages:
        await writer(MessageEnd(message=message))


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


async def test_a_compaction_opens_a_child_and_later_writes_go_there(store: SessionStore) -> None:
    parent = store.create("sales", model="openai:gpt-4.1-mini", config={"pins": ["use polars"]})
    writer = StoreWriter(store.db, parent.id)
    switches: list[tuple[str, str]] = []
    writer.on_switch(lambda old, new: switches.append((old, new)))
    history = conversation(5)
    await writer(AgentStart())
    await feed(writer, history)
    kept = compacted(history)
    await writer(CompactionNotice(messages_before=11, messages_after=4, messages=kept))
    after = [AssistantMessage(content="done", timestamp=5.0)]
    await feed(writer, after)
    await writer(AgentEnd(messages=()))
    assert writer.drain(5)
    child = store.get(writer.session_id)
    assert child.id != parent.id
    assert switches == [(parent.id, child.id)]
    assert (child.parent_id, child.link_kind, child.fork_at) == (parent.id, "compression", 4)
    assert (child.title, child.model, child.settings.pins) == (
        "sales",
        parent.model,
        ("use polars",),
    )
    assert load_messages(store.db, child.id) == [*kept, *after]
    assert child.status == "idle"
    assert writer.stored_messages == 5
    old = store.get(parent.id)
    assert old.message_count == 11
    assert old.end_reason == "compacted"
    assert old.status == "idle"
    assert store.resolve(parent.id) == store.get(child.id)
    assert store.lineage(child.id)[-1].id == parent.id
    # The tool-call records of the kept calls came along.
    calls = store.db.conn.execute(
        "SELECT call_id FROM tool_calls WHERE session_id = ?", (child.id,)
    ).fetchall()
    assert calls == []  # none were recorded by ToolExecutionStart in this test
    # Export and search see the whole history: the parent's messages, then the child's new.
    assert lineage_messages(store.db, child.id) == [*history, *after]
    assert lineage_messages(store.db, parent.id) == history


async def test_two_compactions_chain_and_the_lineage_is_whole(store: SessionStore) -> None:
    parent = store.create("chain")
    writer = StoreWriter(store.db, parent.id)
    first = conversation(3)
    await feed(writer, first)
    await writer(CompactionNotice(messages_before=7, messages_after=4, messages=compacted(first)))
    more = conversation(2)[1:]
    await feed(writer, more)
    middle = [*compacted(first), *more]
    await writer(CompactionNotice(messages_before=8, messages_after=4, messages=compacted(middle)))
    last = [AssistantMessage(content="end", timestamp=9.0)]
    await feed(writer, last)
    assert writer.drain(5)
    resolved = store.resolve(parent.id)
    assert resolved is not None
    assert resolved.id == writer.session_id
    assert len(store.lineage(writer.session_id)) == 2
    assert lineage_messages(store.db, writer.session_id) == [*first, *more, *last]


async def test_a_notice_without_the_transcript_changes_nothing(store: SessionStore) -> None:
    parent = store.create("old producer")
    writer = StoreWriter(store.db, parent.id)
    await writer(CompactionNotice(messages_before=3, messages_after=2))
    assert writer.drain(5)
    assert writer.session_id == parent.id
    assert store.children(parent.id) == []


async def test_the_lease_moves_with_the_session(store: SessionStore, backend: Backend) -> None:
    parent = store.create("leased")
    keeper = LeaseKeeper(store.db, interval=3600)  # a SQLite file: a connection of its own
    try:
        lease = keeper.acquire(parent.id)
        assert isinstance(lease, Lease)
        writer = StoreWriter(store.db, parent.id)
        writer.hold(lease.fence)
        history = conversation(3)
        await feed(writer, history)
        await writer(
            CompactionNotice(messages_before=7, messages_after=4, messages=compacted(history))
        )
        await feed(writer, [AssistantMessage(content="after", timestamp=6.0)])
        assert writer.drain(5)
        assert writer.error is None
        child = writer.session_id
        tokens = dict(store.db.conn.execute("SELECT id, lease_token FROM sessions").fetchall())
        assert tokens == {parent.id: None, child: lease.token}
        assert keeper.beat() == []  # the heartbeat follows, nothing is lost
        assert keeper.lease(child) is lease
        assert lease.session_id == child
        assert keeper.acquire(child) is lease  # this kernel holds it already
        with backend.store() as another:  # another kernel's
            other = LeaseKeeper(another.db, interval=3600)
            try:
                assert other.acquire(parent.id) is not None  # the parent is free to take
                held = other.acquire(child)
                assert not isinstance(held, Lease)  # alive holder: refused, not taken
            finally:
                other.close()
        keeper.release(child)
        token = store.db.conn.execute(
            "SELECT lease_token FROM sessions WHERE id = ?", (child,)
        ).fetchone()[0]
        assert token is None
    finally:
        keeper.close()


async def test_the_summary_call_of_a_compaction_is_billed_to_the_parent(
    store: SessionStore,
) -> None:
    """What the compaction's summary call used is a ledger row of the session that paid
    for it (the parent), written with the move to the child: a session's cost is the sum
    of its ledger rows, compactions included."""
    parent = store.create("sales", model="openai:gpt-4.1-mini")
    writer = StoreWriter(store.db, parent.id)
    history = conversation(3)
    await writer(AgentStart())
    await feed(writer, history)
    used = Usage(input=900, output=120, cost=0.0123)
    notice = CompactionNotice(
        messages_before=7, messages_after=4, messages=compacted(history), usage=used
    )
    await writer(notice)
    await writer(AgentEnd(messages=()))
    assert writer.drain(5)
    query = (
        "SELECT session_id, message_seq, input_tokens, output_tokens, cost FROM usage_ledger"
        " WHERE message_seq IS NULL"
    )
    rows = store.db.conn.execute(query).fetchall()
    assert rows == [(parent.id, None, 900, 120, 0.0123)]
    assert writer.session_id != parent.id, "later writes go to the child"
