"""Spilled tool results (issue 10, item 5): a large result is kept aside, the transcript
and every later request carry only its preview, and ``read_result`` pages through it."""

from __future__ import annotations

import base64

from mibyan_jupyter.core import Agent, ImagePart, TextPart, ToolMessage, tool
from mibyan_jupyter.core.fakes import Call, Reply, ScriptedModel
from mibyan_jupyter.core.messages import ImageUrl
from mibyan_jupyter.core.results import (
    IMAGE_MAX_COUNT,
    SPILL_DETAILS_KEY,
    MemoryResults,
    read_result_tool,
    spill,
)
from mibyan_jupyter.providers.client import ProviderClient
from mibyan_jupyter.providers.retry import RetryPolicy
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, fake_model

BIG = "".join(f"line {i:07d}\n" for i in range(160_000))  # ~2 MB


@tool(side_effects=False)
def dump() -> str:
    """Print a very long log."""
    return BIG


def results_of(agent: Agent) -> list[ToolMessage]:
    return [m for m in agent.state.messages if isinstance(m, ToolMessage)]


async def test_a_2mb_result_never_travels_in_a_request_body(
    fake_provider: FakeProviderServer,
) -> None:
    fake_provider.push(
        FakeReply(calls=[FakeCall("dump", {})]),
        FakeReply(calls=[FakeCall("read_result", {"id": "r1", "offset": 2000, "limit": 100})]),
        FakeReply("Done."),
        FakeReply("Still here."),
    )
    client = ProviderClient(retry=RetryPolicy(max_retries=0))
    client.register("main", fake_model(fake_provider, "main-model"))
    try:
        agent = Agent(stream_fn=client, model="main", tools=[dump])
        assert await agent.achat("dump the log") == "Done."
        assert await agent.achat("and?") == "Still here."
    finally:
        await client.aclose()
    first, page = results_of(agent)
    spilled = (first.details or {})[SPILL_DETAILS_KEY]
    assert spilled == {"id": "r1", "chars": len(BIG), "tool": "dump"}
    assert isinstance(first.content, str)
    assert len(first.content) < 4_000
    assert BIG[:100] in first.content
    assert BIG[-100:] in first.content
    assert "read_result" in first.content
    assert "id='r1'" in first.content
    assert not page.is_error
    assert BIG[2000:2100] in str(page.content)
    sizes = [len(r.raw) for r in fake_provider.requests]
    assert len(sizes) == 4
    assert max(sizes) < 50_000, sizes


def test_small_results_are_untouched_and_pages_are_bounded() -> None:
    store = MemoryResults()
    small = ToolMessage(tool_call_id="c", name="t", content="short")
    assert spill(small, store, 100) is small
    big = ToolMessage(tool_call_id="c", name="t", content="x" * 500, details={"k": 1})
    kept = spill(big, store, 100)
    assert kept.details == {"k": 1, SPILL_DETAILS_KEY: {"id": "r1", "chars": 500, "tool": "t"}}
    assert store.page("r1", 490, 50) == "x" * 10
    assert store.page("nope", 0, 10) is None


def image(size: int) -> ImagePart:
    data = base64.b64encode(b"\0" * size).decode()
    return ImagePart(image_url=ImageUrl(url=f"data:image/png;base64,{data}"))


def test_images_are_capped_by_bytes_and_by_count() -> None:
    parts: tuple[TextPart | ImagePart, ...] = (
        TextPart(text="plots"),
        image(2_000_000),
        *(image(10) for _ in range(6)),
    )
    kept = spill(ToolMessage(tool_call_id="c", content=parts), MemoryResults(), 16_000)
    assert isinstance(kept.content, tuple)
    images = [p for p in kept.content if isinstance(p, ImagePart)]
    notes = [p.text for p in kept.content if isinstance(p, TextPart) and "left out" in p.text]
    assert len(images) == IMAGE_MAX_COUNT
    assert len(notes) == 3
    assert "1 MB" in notes[0]


async def test_read_result_tool_reports_an_unknown_id_as_an_error() -> None:
    store = MemoryResults()
    model = ScriptedModel([Reply(calls=[Call("read_result", {"id": "r9"})]), "ok"])
    agent = Agent(stream_fn=model, tools=[read_result_tool(store)], result_store=store)
    await agent.achat("read")
    [result] = results_of(agent)
    assert result.is_error
    assert "r9" in str(result.content)


async def test_a_given_store_adds_the_tool_and_no_limit_means_no_spill() -> None:
    store = MemoryResults()
    agent = Agent(stream_fn=ScriptedModel(["x"]), result_store=store)
    assert "read_result" in agent.state.tools
    model = ScriptedModel([Reply(calls=[Call("dump", {})]), "ok"])
    plain = Agent(stream_fn=model, tools=[dump], result_limit=None)
    await plain.achat("go")
    assert results_of(plain)[0].content == BIG
    assert "read_result" not in plain.state.tools
