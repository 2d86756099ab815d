"""A resumed session continues as it was: its model and recorded settings (system prompt,
thinking, tool mode, budgets) unless the caller overrides them, and an agent attached to a
stored session continues its history (``run_conversation(conversation_history=None)``),
over real loopback HTTP against the fake provider."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from store_backend import Backend

from mibyan_jupyter.core import Agent
from mibyan_jupyter.core.budget import BudgetLimits
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.secrets import scrub_config
from mibyan_jupyter.store.records import insert_session, record_settings
from mibyan_jupyter.store.session_api import attach, recorded_agent, resume
from mibyan_jupyter.store.session_queries import SessionSettings
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.testing import FakeProviderServer, FakeReply, fake_model


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionStore]:
    with backend.store() as opened:
        yield opened


@pytest.fixture
async def client(fake_provider: FakeProviderServer) -> AsyncIterator[ProviderClient]:
    provider = ProviderClient()
    provider.register("primary", fake_model(fake_provider, "primary-model"))
    provider.register("other", fake_model(fake_provider, "other-model"))
    yield provider
    await provider.aclose()


async def test_resume_continues_with_the_sessions_model_and_settings(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    agent, info = recorded_agent(
        store,
        stream_fn=client,
        model="primary",
        system_prompt="You answer in French.",
        thinking_level="high",
        tool_execution="sequential",
        budget=BudgetLimits(max_turns=4, max_cost=0.5),
    )
    fake_provider.push(FakeReply("Bonjour."))
    await agent.achat("hello")
    assert store.get(info.id).settings == SessionSettings(
        model="primary",
        system_prompt="You answer in French.",
        thinking="high",
        tool_mode="sequential",
        max_turns=4,
        max_cost=0.5,
    )

    resumed, same = resume(store, info.id, stream_fn=client)  # as after a restart
    assert same.id == info.id
    assert resumed.state.model == "primary"
    assert resumed.state.system_prompt == "You answer in French."
    assert resumed.state.thinking_level == "high"
    assert resumed.tool_execution == "sequential"
    assert resumed.budget.max_turns == 4
    assert resumed.budget.max_cost == 0.5
    fake_provider.push(FakeReply("Toujours."))
    assert await resumed.achat("again") == "Toujours."
    body = fake_provider.requests[-1].body
    assert body is not None
    assert body["model"] == "primary-model"  # the session's model answered
    assert body["messages"][0] == {"role": "system", "content": "You answer in French."}

    overridden, _ = resume(store, info.id, stream_fn=client, model="other", thinking_level="off")
    assert (overridden.state.model, overridden.state.thinking_level) == ("other", "off")
    assert overridden.tool_execution == "sequential"  # what was not overridden stays


async def test_an_attached_agent_continues_the_stored_history(
    store: SessionStore, client: ProviderClient, fake_provider: FakeProviderServer
) -> None:
    first, info = recorded_agent(store, stream_fn=client, model="primary", system_prompt="terse")
    fake_provider.push(FakeReply("Paris."))
    await first.achat("capital of France?")

    later = Agent(stream_fn=client, model="primary")  # another script, another day
    writer = attach(later, store, info.id)
    fake_provider.push(FakeReply("About 2 million."))
    result = await later.arun_conversation("and its population?")  # no history given
    body = fake_provider.requests[-1].body
    assert body is not None
    sent = [(m["role"], m["content"]) for m in body["messages"]]
    assert sent == [
        ("system", "terse"),
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and its population?"),
    ]
    assert result["metadata"]["final_response"] == "About 2 million."
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert writer.error is None
    assert store.get(info.id).message_count == 4  # recorded into the same session

    given = Agent(stream_fn=client, model="primary")
    attach(given, store, info.id)
    fake_provider.push(FakeReply("fresh"))
    await given.arun_conversation("new topic", conversation_history=[])  # explicit wins
    body = fake_provider.requests[-1].body
    assert body is not None
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_a_hand_edited_config_does_not_break_the_settings() -> None:
    settings = SessionSettings.of(
        "primary",
        {
            "system_prompt": 3,
            "thinking": "enormous",
            "tool_mode": "sequential",
            "max_turns": True,
            "max_tokens": -5,
            "max_cost": 2,
        },
    )
    assert settings == SessionSettings(model="primary", tool_mode="sequential", max_cost=2.0)
    assert settings.config() == {"tool_mode": "sequential", "max_cost": 2.0}


PATCHES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"a": 1, "n": {"x": 1, "y": 2}}, {"n": {"y": None, "z": [3]}, "b": "t"}),
    ({"a": {"deep": {"er": 1}}}, {"a": 5}),  # a value replaces an object
    ({"a": 5}, {"a": {"b": None, "c": 1}}),  # an object replaces a value, its nulls gone
    ({"keep": True, "list": [1, 2]}, {"list": [None], "gone": None}),  # arrays replace whole
    ({}, {"api_key": "sk-live-secret", "tools": "python"}),  # a credential is never written
]


@pytest.mark.parametrize(("start", "patch"), PATCHES)
def test_record_settings_merges_as_sqlites_json_patch_on_both(
    store: SessionStore, start: dict[str, Any], patch: dict[str, Any]
) -> None:
    """The settings a cell records merge into the config by RFC 7396, in Python on both
    backends: the very result SQLite's own ``json_patch`` gives (which the team store lacks)."""
    session = insert_session(store.db, config=start)
    record_settings(store.db, session, patch)
    with sqlite3.connect(":memory:") as reference:
        (expected,) = reference.execute(
            "SELECT json_patch(?, ?)", (json.dumps(start), json.dumps(scrub_config(patch)))
        ).fetchone()
    assert store.get(session).config == json.loads(expected)
    assert "api_key" not in store.get(session).config
    record_settings(store.db, "no-such-session", patch)  # nothing to merge into: no row made
    assert [info.id for info in store.list(limit=None)] == [session]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # only the team store has it
def test_record_settings_waits_for_a_concurrent_write_and_keeps_it(
    store: SessionStore, backend: Backend
) -> None:
    """On the team store two kernels' transactions run at once: the merge reads the row
    under ``FOR UPDATE``, so it waits for a pin being written and merges into it, instead
    of writing back the config it read before (a lost update). SQLite's one write lock
    orders them already."""
    session = insert_session(store.db, config={"system_prompt": "be brief"})
    admin = backend.pg.admin()
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    waiting += " AND wait_event_type = 'Lock'"
    with SessionStore(backend.target) as other:
        with store.db.transaction() as conn:  # a pin being written, not yet committed
            conn.execute(
                "UPDATE sessions SET config = ? WHERE id = ?",
                (json.dumps({"system_prompt": "be brief", "pins": ["in French"]}), session),
            )
            merge = threading.Thread(
                target=record_settings, args=(other.db, session, {"tools": "python"})
            )
            merge.start()
            deadline = time.monotonic() + 10
            while admin.execute(waiting).fetchone() == (0,):  # until it waits for the row
                assert time.monotonic() < deadline, "record_settings never waited"
                time.sleep(0.01)
        merge.join(10)
    assert not merge.is_alive()
    assert store.get(session).config == {
        "system_prompt": "be brief",
        "pins": ["in French"],
        "tools": "python",
    }
