"""Property: no tool output and no model reply can break a session (issue 10, item 6).

Each example draws a wire API, one to three model replies and what the tool returns for
each call, then runs a recorded session over real loopback HTTP (the fake provider) into a
real SQLite file:

* tool outputs: text with lone surrogates, NUL characters, a huge string, non-str values
  (numbers, ``None``, dicts and lists holding surrogates, an object whose ``repr`` fails,
  a ``ToolResult`` with odd content or details), and raised exceptions (``SystemExit``,
  ``GeneratorExit``, a custom ``BaseException``, ``ValueError``, a ``CancelledError`` of
  the tool's own), from a sync or an async tool;
* model replies: calls with duplicate ids (within a reply), unknown tools, invalid or
  empty JSON arguments, and an empty reply (which the client asks again for).

It asserts that the prompt returns, that the *next* prompt of the same session completes
(``completed``), that the transcript validates (``validate_transcript``), that the event
grammar holds for both runs, and that the store recorded every message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import tempfile
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import Recorder, check_each_run

from mibyan_jupyter.core import Tool, ToolResult, validate_transcript
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import (
    FakeCall,
    FakeProviderServer,
    FakeReply,
    RecordedRequest,
    ScriptItem,
    fake_model,
)


class Weird:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class Custom(BaseException):
    pass


SURROGATE_TEXT = st.text(
    alphabet=st.sampled_from(["a", " ", "é", "\x00", "\ud83d", "\ude00", "\udcff", "\U0001f600"]),
    max_size=12,
)
RAISES = st.sampled_from(
    [SystemExit(2), GeneratorExit(), Custom("x"), ValueError("bad"), asyncio.CancelledError()]
)
RETURNS = st.one_of(
    SURROGATE_TEXT,
    st.just("HUGE"),  # 200,000 characters and a lone surrogate, made when returned
    st.integers(),
    st.none(),
    st.dictionaries(SURROGATE_TEXT, SURROGATE_TEXT, max_size=3),
    st.lists(SURROGATE_TEXT, max_size=3),
    st.just(Weird()),
    st.builds(lambda t: ToolResult(content=(t,)), SURROGATE_TEXT),  # type: ignore[arg-type]
    st.builds(lambda t: ToolResult(content=t, details={"w": Weird(), 1: t}), SURROGATE_TEXT),
)
OUTPUTS = st.tuples(st.one_of(RETURNS, st.builds(lambda e: ("raise", e), RAISES)), st.booleans())

ARGUMENTS = st.one_of(st.just({}), st.just('{"a": '), st.just(""), st.just("[1, 2]"))
CALLS = st.builds(
    FakeCall,
    st.sampled_from(["hostile", "hostile", "async_hostile", "no_such_tool"]),
    ARGUMENTS,
    id=st.sampled_from([None, "call_0", "call_0", "toolu_0"]),
)
REPLIES = st.lists(st.lists(CALLS, min_size=1, max_size=3), min_size=1, max_size=3)


class Outputs:
    """What each call of the hostile tools returns or raises, in call order."""

    def __init__(self, items: list[tuple[Any, bool]]) -> None:
        self.items = deque(items)

    def next(self) -> Any:
        value, _ = self.items[0] if self.items else ("plain", True)
        self.items.rotate(-1)
        if isinstance(value, tuple) and value and value[0] == "raise":
            raise value[1]
        return "x" * 200_000 + "\udcff" if value == "HUGE" else value

    def tools(self) -> list[Tool]:
        async def run_async(*_: object) -> Any:
            await asyncio.sleep(0)
            return self.next()

        schema = {"type": "object"}
        return [
            Tool("hostile", "a hostile sync tool", schema, lambda *_: self.next()),
            Tool("async_hostile", "a hostile async tool", schema, run_async),
        ]


def unique_per_reply(calls: list[FakeCall], reply: int) -> list[FakeCall]:
    """Scripted ids repeat within a reply (what the parsers fix), not across replies: a
    server reusing ``call_0`` in a later reply is a different matter (see the report of
    issue 10: the store keys audit rows by session and call id)."""
    return [
        call if call.id is None else dataclasses.replace(call, id=f"{call.id}_{reply}")
        for call in calls
    ]


class Script:
    """The replies of the current example, served by one fake server for all examples."""

    def __init__(self) -> None:
        self.items: deque[ScriptItem] = deque()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        return self.items.popleft() if self.items else FakeReply("(script exhausted)")


SCRIPT = Script()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(fallback=SCRIPT) as fake:
        yield fake


async def _session(server: FakeProviderServer, mode: str, outputs: Outputs, path: Path) -> None:
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(server, "main-model", api_mode=mode))
    store = SessionStore(path)
    recorder = Recorder()
    try:
        agent, info = recorded_agent(store, stream_fn=client, model="main", tools=outputs.tools())
        agent.subscribe(recorder)
        await agent.achat("go")
        assert agent.state.last_end_reason == "completed", agent.state.error
        assert await agent.achat("next") == "next ok"
        assert agent.state.last_end_reason == "completed"
        validate_transcript(agent.state.messages)
        check_each_run(recorder.events)
        with sqlite3.connect(path) as conn:
            (stored,) = conn.execute(
                "SELECT count(*) FROM messages WHERE session_id = ?", (info.id,)
            ).fetchone()
        assert stored == len(agent.state.messages)
    finally:
        await client.aclose()
        store.close()


@pytest.mark.slow  # a property run: in make test, not in the fast lane
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    mode=st.sampled_from(["chat_completions", "codex_responses", "anthropic_messages"]),
    replies=REPLIES,
    outputs=st.lists(OUTPUTS, min_size=1, max_size=4),
    empty_reply=st.booleans(),
)
def test_the_next_prompt_always_completes(
    server: FakeProviderServer,
    mode: str,
    replies: list[list[FakeCall]],
    outputs: list[tuple[Any, bool]],
    empty_reply: bool,
) -> None:
    SCRIPT.items = deque(
        [
            *(FakeReply(calls=unique_per_reply(calls, n)) for n, calls in enumerate(replies)),
            *([FakeReply("")] if empty_reply else []),  # the client asks again at once
            FakeReply("done"),
            FakeReply("next ok"),
        ]
    )
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_session(server, mode, Outputs(outputs), Path(folder) / "s.sqlite3"))
    assert not SCRIPT.items, "the run asked the model a different number of times"
