"""The small Python API a user (and the ``%agent`` magic) needs: record an agent's run
into a session, start a new recorded agent, or resume one.

    store = SessionStore()                       # the default database
    agent, info = recorded_agent(store, stream_fn=client, model="openai:gpt-4.1-mini")
    await agent.achat("hello")                   # every finished message is durable
    agent, info = resume(store, "last", stream_fn=client)   # after a kernel restart

"Always" approval decisions persist through the store: :func:`approval_policy` returns a
policy that loads them and saves new ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mibyan_jupyter.core.agent import Agent
from mibyan_jupyter.core.approval import ApprovalPolicy, ApprovalRule
from mibyan_jupyter.core.stream import StreamFn
from mibyan_jupyter.store.resume import resume_agent
from mibyan_jupyter.store.sessions import SessionInfo, SessionStore
from mibyan_jupyter.store.writer import StoreWriter


def attach(agent: Agent, store: SessionStore, session: SessionInfo | str) -> StoreWriter:
    """Subscribe a :class:`StoreWriter` for ``session`` to ``agent``; returns the writer
    (``writer.error`` tells whether the store stopped working)."""
    info = store.get(session) if isinstance(session, str) else session
    writer = StoreWriter(store.db, info.id, model=info.model)
    agent.subscribe(writer)
    return writer


def approval_policy(store: SessionStore, rules: Sequence[ApprovalRule] = ()) -> ApprovalPolicy:
    """A policy whose "always" decisions are loaded from and saved to the store."""
    return ApprovalPolicy(
        rules=list(rules), always=store.always_rules(), on_always=store.save_always_rule
    )


def recorded_agent(
    store: SessionStore,
    *,
    stream_fn: StreamFn,
    model: str,
    system_prompt: str = "",
    notebook_path: str | None = None,
    config: Mapping[str, Any] | None = None,
    **agent_kwargs: Any,
) -> tuple[Agent, SessionInfo]:
    """A new session and an Agent whose events are written to it."""
    settings = {"system_prompt": system_prompt, **(config or {})}
    info = store.create(model=model, notebook_path=notebook_path, config=settings)
    agent = Agent(stream_fn=stream_fn, model=model, system_prompt=system_prompt, **agent_kwargs)
    attach(agent, store, info)
    return agent, info


def resume(
    store: SessionStore,
    session: str = "last",
    *,
    stream_fn: StreamFn,
    notebook_path: str | None = None,
    **agent_kwargs: Any,
) -> tuple[Agent, SessionInfo]:
    """Load a session (id, id prefix or ``"last"``), repair its transcript, and return an
    Agent that continues it, recording into the same session."""
    agent, info = resume_agent(
        store, session, stream_fn=stream_fn, notebook_path=notebook_path, **agent_kwargs
    )
    attach(agent, store, info)
    return agent, info
