"""The store's small Python API end to end: record, restart (a new store object), resume,
on a SQLite file and on the team store."""

from __future__ import annotations

from store_backend import Backend

from mibyan_jupyter.core import (
    ApprovalGate,
    ApprovalRequest,
    Approved,
    AssistantMessage,
    ScriptedModel,
    tool,
)
from mibyan_jupyter.core.fakes import Call, Reply
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.store import approval_policy, recorded_agent, resume, search


@tool
def save(name: str) -> str:
    """Save something (side effects: needs approval)."""
    return f"saved {name}"


async def test_record_then_resume_after_a_restart(backend: Backend) -> None:
    store = backend.store()
    model = ScriptedModel(
        [Reply("Saving.", calls=[Call("save", {"name": "plot"})]), "Saved the plot."]
    )
    asked: list[str] = []

    async def approve_always(request: ApprovalRequest, signal: AbortSignal) -> Approved:
        asked.append(request.tool_name)
        return Approved(scope="always")

    agent, info = recorded_agent(
        store,
        stream_fn=model,
        model="demo",
        system_prompt="Be brief.",
        notebook_path="work.ipynb",
        tools=[save],
        approval=ApprovalGate(approval_policy(store), approve_always),
    )
    assert await agent.achat("save my plot") == "Saved the plot."
    store.close()

    # "kernel restart": new objects, same store
    store = backend.store()
    last = store.last("work.ipynb")
    assert last is not None
    assert last.id == info.id
    assert last.title == "save my plot"
    assert last.status == "idle"
    assert last.message_count == 4
    more = ScriptedModel([Reply("Again.", calls=[Call("save", {"name": "table"})]), "Done."])
    resumed, same = resume(
        store,
        "last",
        stream_fn=more,
        tools=[save],
        approval=ApprovalGate(approval_policy(store), approve_always),
    )
    assert same.id == info.id
    assert resumed.state.system_prompt == "Be brief."
    assert await resumed.achat("and the table") == "Done."
    assert asked == ["save"]  # "always" was remembered across the restart
    # the model saw the whole conversation
    assert [m.role for m in more.requests[0].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert store.get(info.id).message_count == 8
    hits = search(store, "table")
    assert hits
    assert hits[0].session_id == info.id
    final = resumed.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    store.close()
