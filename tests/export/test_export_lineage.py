"""An export of a compacted session shows the whole conversation (the parent's messages,
then what followed in the child), with spilled tool results inlined in full."""

from __future__ import annotations

import functools
from pathlib import Path

from mibyan_jupyter.core.events import MessageEnd
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from mibyan_jupyter.core.notices import CompactionNotice
from mibyan_jupyter.core.results import SPILL_DETAILS_KEY
from mibyan_jupyter.export import SessionMeta, export_markdown
from mibyan_jupyter.export.spilled import inline_spilled, spilled_id
from mibyan_jupyter.store.lineage import lineage_messages
from mibyan_jupyter.store.results import SessionResults, full_text
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.store.writer import StoreWriter

FULL = "".join(f"row {i}: value {i * 7}\n" for i in range(3_000))


async def test_export_of_a_compacted_session_has_everything(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    parent = store.create("export me")
    writer = StoreWriter(store.db, parent.id)
    results = SessionResults(store.db, parent.id, writer=writer)
    rid = results.keep("c1", "dump", FULL)
    call = ToolCall(id="c1", function=FunctionCall(name="dump", arguments="{}"))
    preview = ToolMessage(
        tool_call_id="c1",
        name="dump",
        content=f"{FULL[:50]}… [{len(FULL)} characters; call read_result with id={rid}]",
        details={SPILL_DETAILS_KEY: {"id": rid, "chars": len(FULL), "tool": "dump"}},
        timestamp=3.0,
    )
    history: list[Message] = [
        UserMessage(content="Dump the table", timestamp=1.0),
        AssistantMessage(content="", tool_calls=(call,), timestamp=2.0),
        preview,
        AssistantMessage(content="The middle part: row 1500 matters", timestamp=4.0),
        UserMessage(content="and now?", timestamp=5.0),
    ]
    for message in history:
        await writer(MessageEnd(message=message))
    summary = UserMessage(content="[Summary] dumped", timestamp=6.0)
    kept = (history[0], summary, history[-1])
    await writer(CompactionNotice(messages_before=5, messages_after=3, messages=kept))
    reply = AssistantMessage(content="Carrying on after compaction", timestamp=7.0)
    await writer(MessageEnd(message=reply))
    assert writer.drain(5)

    whole = lineage_messages(store.db, writer.session_id)
    assert whole == [*history, reply]
    assert spilled_id(whole[2]) == rid
    assert spilled_id(whole[0]) is None
    inlined = inline_spilled(whole, functools.partial(full_text, store.db, writer.session_id))
    assert inlined[2].content == FULL
    assert inlined[3:] == whole[3:]
    text = export_markdown(inlined, session=SessionMeta(id=writer.session_id, title="export me"))
    # The export shows the full result up to its own per-result clip (render.RESULT_LIMIT),
    # far past the preview's 50 characters.
    assert "row 1500 matters" in text
    assert "row 60: value 420" in text
    assert "Carrying on after compaction" in text
    assert "[Summary] dumped" not in text


def test_a_result_the_lookup_does_not_find_keeps_its_preview() -> None:
    preview = ToolMessage(
        tool_call_id="c1", content="head… tail", details={SPILL_DETAILS_KEY: {"id": "gone"}}
    )
    assert inline_spilled([preview], lambda _rid: None) == [preview]
