"""No text can break a session (issue 10, item 6): lone surrogates and odd tool return values.

A lone surrogate (U+D800..U+DFFF) in a Python str cannot be encoded as UTF-8, so one in a
transcript used to fail every later request body, store write and export of the session.
These tests put such text in where it enters — a tool result (of a ``@tool``, a raw
:class:`Tool`, a kernel file tool listing a real folder with a non-UTF-8 name), a prompt,
a steering or follow-up message, a history — and then check, over real loopback HTTP
against the fake provider and a real SQLite store, that the *next* prompt of the same
session completes and the store holds every message, with U+FFFD in place of the bad code
point.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from support import Recorder, check_each_run

from mibyan_jupyter.core import (
    Agent,
    AssistantMessage,
    TextPart,
    Tool,
    ToolMessage,
    ToolResult,
    UserMessage,
    tool,
    validate_transcript,
)
from mibyan_jupyter.jupyter.kernel_tools.files import file_tools
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.store import SessionStore, recorded_agent
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model

LONE = "\udcff"
MODES = ("chat_completions", "codex_responses", "anthropic_messages")


@asynccontextmanager
async def http_session(
    tmp_path: Path, server: FakeProviderServer, tools: Sequence[Tool], mode: str
) -> AsyncIterator[tuple[Agent, Path, str, Recorder]]:
    """An agent answered by the fake server over loopback HTTP, recorded in a real SQLite
    file; yields (agent, database path, session id, event recorder)."""
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(server, "main-model", api_mode=mode))
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    agent, info = recorded_agent(store, stream_fn=client, model="main", tools=list(tools))
    recorder = Recorder()
    agent.subscribe(recorder)
    try:
        yield agent, path, info.id, recorder
    finally:
        await client.aclose()
        store.close()


def stored(path: Path, session_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    return [json.loads(data) for (data,) in rows]


def request_bodies(server: FakeProviderServer) -> list[str]:
    return [r.raw.decode("utf-8") for r in server.requests]


@tool(side_effects=False)
def broken_name() -> str:
    """Return a file name that is not valid UTF-8, as os.listdir decodes it."""
    return f"caf{LONE}.csv"


@pytest.mark.parametrize("mode", MODES)
async def test_a_lone_surrogate_from_a_tool_never_breaks_the_next_prompt(
    tmp_path: Path, fake_provider: FakeProviderServer, mode: str
) -> None:
    fake_provider.push(
        FakeReply(calls=[FakeCall("broken_name")]),
        FakeReply("It is caf\ufffd.csv."),
        FakeReply("Still here."),
    )
    async with http_session(tmp_path, fake_provider, [broken_name], mode) as (
        agent,
        path,
        session,
        recorder,
    ):
        assert await agent.achat("what is the name?") == "It is caf\ufffd.csv."
        assert await agent.achat("and now?") == "Still here."
        check_each_run(recorder.events)
        validate_transcript(agent.state.messages)
        result = next(m for m in agent.state.messages if isinstance(m, ToolMessage))
        assert result.content == "caf\ufffd.csv"
        rows = stored(path, session)
        assert [r["role"] for r in rows] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert rows[2]["content"] == "caf\ufffd.csv"
    assert len(fake_provider.requests) == 3
    assert all("caf\ufffd.csv" in body for body in request_bodies(fake_provider)[1:])


class Weird:
    """An object a tool might return: no JSON form, and a repr that fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def raw_tool(name: str, value: Any) -> Tool:
    """A raw Tool (no @tool conversion) returning ``value`` as is."""
    return Tool(name, "returns a hostile value", {"type": "object"}, lambda *_: value)


HOSTILE_RESULTS = {
    "surrogate_parts": ToolResult(content=(f"a{LONE}",)),  # type: ignore[arg-type]
    "number_content": ToolResult(content=42),  # type: ignore[arg-type]
    "none_content": ToolResult(content=None),  # type: ignore[arg-type]
    "dict_parts": ToolResult(content=({"type": "text", "text": f"x{LONE}"},)),  # type: ignore[arg-type]
    "odd_details": ToolResult(content="ok", details={"f": Weird(), "s": {1, 2}, 3: f"{LONE}"}),
    "list_details": ToolResult(content="ok", details=[1, 2]),  # type: ignore[arg-type]
    "nul_and_big": ToolResult(content="\x00" + "x" * 300_000 + LONE),
    "dict_return": {"name": f"caf{LONE}", "nested": [LONE, {"k": LONE}]},
    "object_return": Weird(),
    "cyclic_return": (cyclic := [1]).append(cyclic) or cyclic,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_RESULTS))
async def test_any_tool_result_becomes_a_message_the_store_and_the_wire_accept(
    tmp_path: Path, fake_provider: FakeProviderServer, kind: str
) -> None:
    fake_provider.push(FakeReply(calls=[FakeCall("hostile")]), FakeReply("Seen."), FakeReply("Ok."))
    hostile = raw_tool("hostile", HOSTILE_RESULTS[kind])
    async with http_session(tmp_path, fake_provider, [hostile], "chat_completions") as (
        agent,
        path,
        session,
        recorder,
    ):
        assert await agent.achat("go") == "Seen."
        assert await agent.achat("again") == "Ok."
        check_each_run(recorder.events)
        validate_transcript(agent.state.messages)
        assert len(stored(path, session)) == 6
        result = next(m for m in agent.state.messages if isinstance(m, ToolMessage))
        result.model_dump_json()  # encodes: no surrogate, no unknown object left
    assert len(fake_provider.requests) == 3


async def test_prompts_steering_follow_ups_and_histories_are_cleaned(
    tmp_path: Path, fake_provider: FakeProviderServer
) -> None:
    for _ in range(6):
        fake_provider.push(FakeReply("ok"))
    async with http_session(tmp_path, fake_provider, [], "anthropic_messages") as (
        agent,
        path,
        session,
        _,
    ):
        agent.follow_up(f"follow {LONE}")
        assert await agent.achat(f"hello {LONE} and \ud83d\ude00") == "ok"
        agent.steer(UserMessage(content=f"steer {LONE}"))
        await agent.continue_()
        await agent.prompt([UserMessage(content=(TextPart(text=f"part {LONE}"),))])
        result = await agent.arun_conversation(
            f"again {LONE}",
            system_message=f"be kind {LONE}",
            conversation_history=[
                {"role": "user", "content": f"old {LONE}"},
                {"role": "assistant", "content": f"older {LONE}"},
            ],
        )
        assert result["messages"]
        assert agent.state.system_prompt == "be kind \ufffd"
        texts = [json.dumps(r, ensure_ascii=False) for r in stored(path, session)]
        assert any("hello \ufffd and \U0001f600" in t for t in texts)
        assert any("follow \ufffd" in t for t in texts)
        assert any("steer \ufffd" in t for t in texts)
        assert any("part \ufffd" in t for t in texts)
        validate_transcript(agent.state.messages)
    for body in request_bodies(fake_provider):
        assert "\\udcff" not in body.lower()


@pytest.fixture
def odd_folder(tmp_path: Path) -> Path:
    """A notebook folder holding one file, named by the bytes ``caf\\xff.csv``."""
    folder = tmp_path / "nb"
    folder.mkdir()
    Path(os.fsdecode(os.fsencode(folder) + b"/caf\xff.csv")).write_bytes(b"a,b\n1,2\n")
    return folder


@pytest.mark.skipif(sys.platform == "darwin", reason="APFS refuses names that are not UTF-8")
async def test_list_folder_of_a_real_folder_with_a_non_utf8_name(
    tmp_path: Path, odd_folder: Path, fake_provider: FakeProviderServer
) -> None:
    """The kernel's ``list_folder`` (no approval needed) on a folder holding a file whose
    name is the bytes ``caf\\xff.csv``: the session goes on, and the name as shown reads
    the file back."""
    tools = file_tools(root=odd_folder)
    fake_provider.push(
        FakeReply(calls=[FakeCall("list_folder", {"path": "."})]),
        FakeReply(calls=[FakeCall("read_file", {"path": "caf\ufffd.csv"})]),
        FakeReply("Two columns."),
        FakeReply("Yes."),
    )
    async with http_session(tmp_path, fake_provider, tools, "codex_responses") as (
        agent,
        path,
        session,
        _,
    ):
        assert await agent.achat("what is here?") == "Two columns."
        assert await agent.achat("sure?") == "Yes."
        listing, content = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
        assert "caf\ufffd.csv (8 B)" in str(listing.content)
        assert "not valid UTF-8" in str(listing.content)
        assert content.content == "a,b\n1,2\n"
        assert not content.is_error
        assert len(stored(path, session)) == 8
        final = agent.state.messages[-1]
        assert isinstance(final, AssistantMessage)
        assert final.content == "Yes."
