"""Memory files that outlive sessions: Markdown lists a person can edit, per-folder
overrides, caps, redaction, atomic writes, and the tools an agent edits them with."""

from __future__ import annotations

from pathlib import Path

import pytest

from mibyan_jupyter.core import Agent, Call, Reply, ScriptedModel
from mibyan_jupyter.memory import MAX_CHARS, Memory, MemoryEditError, memory_tools
from mibyan_jupyter.memory.files import HEADINGS


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Memory:
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "home-memory"))
    return Memory.for_folder(tmp_path / "project")


def test_entries_are_added_replaced_and_removed_as_a_markdown_list(memory: Memory) -> None:
    notes = memory.file("memory")
    assert notes.entries() == []
    notes.add("sales.csv has one row per store and month")
    notes.add("the user's  plots use   seaborn")
    notes.add("sales.csv has one row per store and month")  # twice is once
    assert notes.entries() == [
        "sales.csv has one row per store and month",
        "the user's plots use seaborn",
    ]
    assert notes.path.read_text().splitlines()[0] == HEADINGS["memory"]
    notes.replace("seaborn", "the user's plots use matplotlib")
    notes.remove("1")
    assert notes.entries() == ["the user's plots use matplotlib"]


def test_what_the_user_wrote_in_the_file_is_kept(memory: Memory) -> None:
    path = memory.file("user").path
    path.parent.mkdir(parents=True)
    path.write_text("# Mine\nA note in my own words.\n- prefers French\n")
    memory.file("user").add("likes short answers")
    assert path.read_text() == (
        "# Mine\nA note in my own words.\n- prefers French\n- likes short answers\n"
    )


def test_edits_that_cannot_be_made_say_why(memory: Memory) -> None:
    notes = memory.file("memory")
    notes.add("alpha one")
    notes.add("alpha two")
    with pytest.raises(MemoryEditError, match="2 entries contain 'alpha'"):
        notes.remove("alpha")
    with pytest.raises(MemoryEditError, match="no entry contains 'beta'"):
        notes.replace("beta", "x")
    with pytest.raises(MemoryEditError, match="there is no entry 9"):
        notes.remove("9")
    with pytest.raises(MemoryEditError, match="empty memory entry"):
        notes.add("   ")


def test_a_file_is_capped_and_a_refused_write_leaves_it_as_it_was(memory: Memory) -> None:
    notes = memory.file("memory")
    refused = None
    for n in range(50):
        try:
            notes.add(f"fact number {n}: " + "x" * 300)
        except MemoryEditError as error:
            refused = str(error)
            break
    assert refused is not None
    assert f"would pass {MAX_CHARS} characters" in refused
    before = notes.path.read_text()
    assert len(before) <= MAX_CHARS
    with pytest.raises(MemoryEditError):
        notes.add("one more " + "y" * 300)
    assert notes.path.read_text() == before
    assert [p.name for p in notes.path.parent.iterdir()] == ["MEMORY.md"]  # no temp files left


def test_secrets_and_lone_surrogates_never_reach_the_file(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop")
    memory.file("memory").add("the key is sk-test-abcdefghijklmnop, file report-\udcff.csv")
    text = memory.file("memory").path.read_text(encoding="utf-8")
    assert "sk-test-abcdefghijklmnop" not in text
    assert "[redacted]" in text
    assert "report-\ufffd.csv" in text


def test_a_folder_of_its_own_overrides_the_users_memory(tmp_path: Path, memory: Memory) -> None:
    memory.file("memory").add("global fact")
    local = tmp_path / "project" / ".mibyan" / "MEMORY.md"
    local.parent.mkdir(parents=True)
    local.write_text("- course fact\n")
    assert memory.file("memory").entries() == ["course fact"]
    assert Memory.for_folder(tmp_path / "elsewhere").file("memory").entries() == ["global fact"]


def test_the_snapshot_holds_both_files_and_leaves_empty_ones_out(memory: Memory) -> None:
    assert memory.snapshot() == ""
    memory.file("user").add("prefers French")
    assert memory.snapshot() == "About the user:\n- prefers French"
    memory.file("memory").add("uses pandas 2")
    assert memory.snapshot() == "Learned:\n- uses pandas 2\nAbout the user:\n- prefers French"


async def test_an_agent_remembers_with_its_tools_and_reads_back(memory: Memory) -> None:
    model = ScriptedModel(
        [
            Reply(calls=[Call("memory_add", {"text": "revenue is in EUR", "which": "memory"})]),
            Reply(calls=[Call("memory_add", {"text": "x" * 600})]),
            Reply(calls=[Call("memory_read", {})]),
            "Noted.",
        ]
    )
    agent = Agent(stream_fn=model, tools=memory_tools(memory))
    await agent.prompt("Remember the currency")
    results = [m.content for m in agent.state.messages if m.role == "tool"]
    assert results[0].startswith("saved.\n1. revenue is in EUR")
    assert results[1].startswith("not saved: a memory entry is at most 500 characters")
    assert results[2] == "1. revenue is in EUR"
    assert memory.file("memory").entries() == ["revenue is in EUR"]
    assert all(not t.side_effects for t in memory_tools(memory))  # never asks
