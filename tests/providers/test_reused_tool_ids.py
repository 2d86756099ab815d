"""A tool-call id reused in a LATER reply (issue 10, item 6).

Kimi's ``functions.name:0`` restarts with every reply, and DeepSeek and GLM servers send
``call_0`` again in the next reply. The store keys its audit rows by (session, call id), so
without a fix the later call replaces the earlier call's row, and the transcript holds two
calls (and two results) of one id. ``stream_once`` hands the parser the ids the request's
assistant messages already use, so a reused id is renamed like a repeat within one reply.
Real loopback HTTP (the fake server sends the scripted ids), a real Agent, ProviderClient
and store writer on a real SQLite file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mibyan_jupyter.core import AssistantMessage, ToolMessage, tool, validate_transcript
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model
from tests.providers.test_duplicate_tool_ids import MODES, sent_pairs

WIRE = {"chat_completions": "call_0", "codex_responses": "call_0", "anthropic_messages": "toolu_0"}


@pytest.mark.parametrize("mode", MODES)
async def test_an_id_reused_in_a_later_reply_keeps_two_rows_and_pairs(
    tmp_path: Path, fake_provider: FakeProviderServer, mode: str
) -> None:
    ran: list[int] = []

    @tool(side_effects=False)
    def record(n: int) -> str:
        """Record that call n ran."""
        ran.append(n)
        return f"ran {n}"

    wire = WIRE[mode]
    unique = [wire, f"{wire}-2", f"{wire}-3"]
    fake_provider.push(
        FakeReply(calls=[FakeCall("record", {"n": 1}, id=wire)]),
        FakeReply("First done."),
        # the next turn's reply restarts its numbering: the same id, twice
        FakeReply(calls=[FakeCall("record", {"n": n}, id=wire) for n in (2, 3)]),
        FakeReply("Second done."),
        FakeReply("Still fine."),
    )
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, "main-model", api_mode=mode))
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    try:
        agent, info = recorded_agent(store, stream_fn=client, model="main", tools=[record])
        assert await agent.achat("run one") == "First done."
        assert await agent.achat("run two") == "Second done."
        assert await agent.achat("and?") == "Still fine."
    finally:
        await client.aclose()
        store.close()

    assert ran == [1, 2, 3]  # each call ran exactly once
    calls = [
        c.id for m in agent.state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert calls == unique
    results = [
        (m.tool_call_id, m.content) for m in agent.state.messages if isinstance(m, ToolMessage)
    ]
    assert results == list(zip(unique, ["ran 1", "ran 2", "ran 3"], strict=True))
    validate_transcript(agent.state.messages)

    # the last request pairs each result with its own call, in order
    body = fake_provider.requests[-1].body
    assert body is not None
    sent, answered = sent_pairs(body, mode)
    assert sent == unique
    assert answered == unique

    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT call_id, status, arguments FROM tool_calls WHERE session_id = ?"
            " ORDER BY call_id",
            (info.id,),
        ).fetchall()
    assert [(call_id, status) for call_id, status, _ in rows] == [(c, "done") for c in unique]
    assert [args.replace(" ", "") for *_, args in rows] == ['{"n":1}', '{"n":2}', '{"n":3}']
