"""Two tool calls with the same id in one reply (issue 10, item 6).

DeepSeek, GLM and Kimi servers number calls per reply and have been seen sending
``call_0`` twice in one message. The three wire parsers make the ids unique as they
finish each call (``call_0``, ``call_0-2``, ``call_0-3``), so each call runs once, gets its
own result and its own audit row, and the next request pairs every result with its call.
Everything goes over real loopback HTTP (the fake server sends the scripted ids) into a
real SQLite store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import AssistantMessage, ToolMessage, tool, validate_transcript
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.openai_chat import ChatStreamParser
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.providers.sse import SseEvent
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model

MODES = ("chat_completions", "codex_responses", "anthropic_messages")
UNIQUE = {
    "chat_completions": ["call_0", "call_0-2", "call_0-3"],
    "codex_responses": ["call_0", "call_0-2", "call_0-3"],
    "anthropic_messages": ["toolu_0", "toolu_0-2", "toolu_0-3"],
}


def sent_pairs(body: dict[str, Any], mode: str) -> tuple[list[str], list[str]]:
    """(call ids, result ids) of the second request, as the wire carries them."""
    if mode == "chat_completions":
        calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
        results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    elif mode == "codex_responses":
        calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        results = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    else:
        blocks = [
            b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
        ]
        calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    return calls, results


@pytest.mark.parametrize("mode", MODES)
async def test_duplicate_ids_run_once_each_with_their_own_result_and_row(
    tmp_path: Path, fake_provider: FakeProviderServer, mode: str
) -> None:
    ran: list[int] = []

    @tool(side_effects=False)
    def record(n: int) -> str:
        """Record that call n ran."""
        ran.append(n)
        return f"ran {n}"

    wire_id = UNIQUE[mode][0]
    fake_provider.push(
        FakeReply(calls=[FakeCall("record", {"n": n}, id=wire_id) for n in (1, 2, 3)]),
        FakeReply("All three ran."),
        FakeReply("Still fine."),
    )
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, "main-model", api_mode=mode))
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    try:
        agent, info = recorded_agent(store, stream_fn=client, model="main", tools=[record])
        assert await agent.achat("run three") == "All three ran."
        assert await agent.achat("and?") == "Still fine."
    finally:
        await client.aclose()
        store.close()

    assert sorted(ran) == [1, 2, 3]  # each call ran exactly once
    reply = agent.state.messages[1]
    assert isinstance(reply, AssistantMessage)
    assert [c.id for c in reply.tool_calls] == UNIQUE[mode]
    results = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
    assert [(r.tool_call_id, r.content) for r in results] == list(
        zip(UNIQUE[mode], ["ran 1", "ran 2", "ran 3"], strict=True)
    )
    validate_transcript(agent.state.messages)

    body = fake_provider.requests[1].body
    assert body is not None
    calls, answered = sent_pairs(body, mode)
    assert calls == UNIQUE[mode]
    assert answered == UNIQUE[mode]

    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT call_id, status, arguments FROM tool_calls WHERE session_id = ?"
            " ORDER BY call_id",
            (info.id,),
        ).fetchall()
    assert [(call_id, status) for call_id, status, _ in rows] == [
        (call_id, "done") for call_id in UNIQUE[mode]
    ]
    assert {args.replace(" ", "") for *_, args in rows} == {'{"n":1}', '{"n":2}', '{"n":3}'}


def test_fragments_that_repeat_the_duplicate_id_continue_their_own_call() -> None:
    """Some servers repeat the id on every fragment of a call: the second ``call_0`` (at
    index 1) keeps its fragments, though its id was made unique."""
    parser = ChatStreamParser("m")
    chunks = [
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0",'
        '"function":{"name":"f","arguments":"{\\"a\\":"}}]}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0",'
        '"function":{"arguments":"1}"}}]}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_0",'
        '"function":{"name":"g","arguments":"{\\"b\\":"}}]}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_0",'
        '"function":{"arguments":"2}"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        "[DONE]",
    ]
    for data in chunks:
        parser.feed(SseEvent(event="message", data=data))
    message = parser.finish()
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("call_0", "f", '{"a":1}'),
        ("call_0-2", "g", '{"b":2}'),
    ]


def test_an_emoji_split_into_surrogate_escapes_across_fragments_is_joined() -> None:
    parser = ChatStreamParser("m")
    chunks = [
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
        '"function":{"name":"f","arguments":"{\\"s\\": \\"\\ud83d"}}]}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"arguments":"\\ude00\\ud800\\"}"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        "[DONE]",
    ]
    for data in chunks:
        parser.feed(SseEvent(event="message", data=data))
    (call,) = parser.finish().tool_calls
    assert call.function.arguments == '{"s": "\U0001f600\ufffd"}'
