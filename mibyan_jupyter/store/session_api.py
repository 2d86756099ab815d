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
from mibyan_jupyter.store.resume import load_history as load_session_history
from mibyan_jupyter.store.resume import remember_repairs, resume_agent
from mibyan_jupyter.store.session_queries import SessionSettings
from mibyan_jupyter.store.sessions import SessionInfo, SessionStore
from mibyan_jupyter.store.writer import StoreWriter


def attach(
    agent: Agent, store: SessionStore, session: SessionInfo | str, *, load_history: bool = True
) -> StoreWriter:
    """Subscribe a :class:`StoreWriter` for ``session`` to ``agent``; returns the writer
    (``writer.error`` tells whether the store stopped working).

    An agent with an empty transcript attached to a session that has messages gets the
    session's repaired history (and its system prompt, when the agent has none), so
    ``run_conversation(conversation_history=None)`` and ``chat`` continue the stored
    conversation: the Hermes seed's "auto-loaded from session if omitted". The core does
    not know the store: the history is put on the agent here. What was repaired:
    :func:`~.resume.take_repair_report` of the agent.
    """
    info = store.get(session) if isinstance(session, str) else session
    if load_history and not agent.state.messages and info.message_count:
        history = load_session_history(store, info, verify=True)  # no Agent checks it
        agent.state.messages = history.messages
        recorded = info.settings.system_prompt
        if not agent.state.system_prompt and recorded:
            agent.state.system_prompt = recorded
        remember_repairs(agent, history.repairs)
    writer = StoreWriter(store.db, info.id, model=info.model)
    agent.subscribe(writer)
    return writer


def agent_settings(
    model: str, system_prompt: str, agent_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The settings a new session records (see :class:`SessionSettings`), from the
    arguments its agent is made with."""
    budget = agent_kwargs.get("budget")
    recorded = SessionSettings(
        model=model,
        system_prompt=system_prompt,
        thinking=agent_kwargs.get("thinking_level"),
        tool_mode=agent_kwargs.get("tool_execution"),
        max_turns=getattr(budget, "max_turns", None),
        max_tokens=getattr(budget, "max_total_tokens", None),
        max_cost=getattr(budget, "max_cost", None),
    )
    return recorded.config()


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
    settings = {**agent_settings(model, system_prompt, agent_kwargs), **(config or {})}
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
    Agent that continues it with the session's model and settings (``agent_kwargs`` win),
    recording into the same session. What was repaired: ``take_repair_report(agent)``."""
    agent, info = resume_agent(
        store, session, stream_fn=stream_fn, notebook_path=notebook_path, **agent_kwargs
    )
    attach(agent, store, info)
    return agent, info
