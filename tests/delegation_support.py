"""Helpers of the delegation tests (tests/core/test_delegation*.py): a fake provider that
routes each request to a script by who asks, and a parent agent with ``delegate_task``.

Parent and children share one loopback server, and parallel children ask in any order, so
the script is not a FIFO: the server's fallback routes each request by its first user
message (the parent's prompt or a child's goal) and answers by how many assistant turns
the request already carries. :func:`routed` is what the test modules' fixtures serve.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mibyan_jupyter.core import Agent, ApprovalGate, ToolMessage, tool
from mibyan_jupyter.core.budget_gate import BudgetGate
from mibyan_jupyter.core.delegation import ChildRun, delegate_tool
from mibyan_jupyter.core.tools import Tool
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model
from mibyan_jupyter.testing.scripts import RecordedRequest, ScriptItem

PARENT = "PARENT:"
Turns = Callable[[int, RecordedRequest], ScriptItem]


def user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content)
            return str(content)
    return ""


@dataclass
class Router:
    """The fake server's answers: ``scripts`` maps a prefix of the first user message to a
    function of (assistant turns so far, request)."""

    scripts: dict[str, Turns]
    seen: list[tuple[str, int, RecordedRequest]] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        body = request.body or {}
        first = user_text(body)
        key = next((k for k in self.scripts if first.startswith(k)), None)
        if key is None:
            return FakeReply(f"no script for {first[:40]!r}")
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        self.seen.append((key, turn, request))
        return self.scripts[key](turn, request)

    def of(self, key: str) -> list[RecordedRequest]:
        return [r for k, _, r in self.seen if k == key]


def replies(*items: ScriptItem) -> Turns:
    """The n-th item for the n-th turn (the last one repeated)."""
    return lambda turn, _request: items[min(turn, len(items) - 1)]


def delegate(
    goal: str, *, call_id: str, tools: Sequence[str] | None = None, **extra: Any
) -> FakeCall:
    args: dict[str, Any] = {"goal": goal, **extra}
    if tools is not None:
        args["tools"] = list(tools)
    return FakeCall("delegate_task", args, id=call_id)


@tool(side_effects=False)
def step(n: int) -> str:
    """Take step ``n``."""
    return f"step {n} taken"


@contextlib.asynccontextmanager
async def routed(router: Router) -> AsyncIterator[tuple[FakeProviderServer, ProviderClient]]:
    """The fake provider answering every request with ``router`` (its FIFO stays empty),
    and a client of it without retries (the fixtures of the test modules)."""
    with FakeProviderServer(fallback=router) as server:
        client = ProviderClient(retry=RetryPolicy(max_retries=0))
        client.register("main", fake_model(server, "main-model"))
        try:
            yield server, client
        finally:
            await client.aclose()


def parent_agent(
    client: ProviderClient,
    tools: Sequence[Tool],
    gate: BudgetGate,
    *,
    approval: ApprovalGate | None = None,
    **delegation: Any,
) -> Agent:
    """A parent with ``tools`` and a ``delegate_task`` that may give children those tools."""
    parent = Agent(
        stream_fn=client,
        model="main",
        tools=list(tools),
        budget=gate.limits,
        approval=approval,
        loop_options={"budget_gate": gate},
    )
    parent.state.tools.add(delegate_tool(parent, tools=tools, gate=gate, **delegation))
    return parent


def tool_results(agent: Agent, name: str = "delegate_task") -> list[ToolMessage]:
    return [m for m in agent.state.messages if isinstance(m, ToolMessage) and m.name == name]


def child_results(runs: Sequence[ChildRun]) -> list[ToolMessage]:
    """Every tool result of the children's transcripts."""
    return [m for r in runs for m in r.agent.state.messages if isinstance(m, ToolMessage)]


def detail(result: ToolMessage, key: str) -> Any:
    """One of a delegate result's details."""
    assert result.details is not None
    return result.details[key]


def tool_names(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in (request.body or {}).get("tools", [])]
