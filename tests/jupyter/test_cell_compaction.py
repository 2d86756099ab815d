"""Sessions that last, in the cell: the compaction options and defaults, the context window
per model, the session's prompt builder (notebook context, memory, pins), the variables
note, ``%agent pin / pins / unpin / compact`` and the memory flush, in a real
InteractiveShell over real loopback HTTP and a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.core.messages import AssistantMessage, UserMessage
from mibyan_jupyter.jupyter.cell.context import add_facts, memory_flush, variables_note
from mibyan_jupyter.jupyter.cell.models import context_window_of
from mibyan_jupyter.jupyter.cell.options import parse_cell_line
from mibyan_jupyter.jupyter.cell.plan import plan_from_options
from mibyan_jupyter.jupyter.defaults import BUILTIN
from mibyan_jupyter.jupyter.state import kernel_state, reset_kernel_state
from mibyan_jupyter.memory import Memory
from mibyan_jupyter.testing import FakeProviderServer, FakeReply


@pytest.fixture
def shell(loaded_shell: InteractiveShell) -> InteractiveShell:
    return loaded_shell


def cell(shell: InteractiveShell, line: str, prompt: str) -> None:
    result = shell.run_cell(f"%%agent {line}\n{prompt}\n")
    assert result.error_in_exec is None, result.error_in_exec


def agent() -> Any:
    (info,) = kernel_state().store().list()
    handle = kernel_state().session(info.id)
    assert handle is not None
    return handle.agent


def system_of(body: dict[str, Any]) -> str:
    (first,) = [m for m in body["messages"] if m["role"] == "system"]
    return str(first["content"])


# -- options and defaults --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("--compact sometimes", "--compact must be one of auto, ask, off; got 'sometimes'"),
        ("--context-window lots", "--context-window must be a positive integer of at most"),
        ("--context-window -5", "--context-window must be a positive integer"),
    ],
)
def test_bad_compaction_options_are_one_line_usage_errors(line: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_cell_line(line, BUILTIN)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_compaction_options_and_their_configured_defaults(shell: InteractiveShell) -> None:
    options = parse_cell_line("", BUILTIN)
    assert (options.compact, options.context_window, options.variables) == ("auto", None, True)
    options = parse_cell_line("--compact ask --context-window 32000 --no-variables", BUILTIN)
    assert (options.compact, options.context_window, options.variables) == ("ask", 32000, False)
    assert {"compact", "context_window", "variables"} <= options.explicit
    shell.run_line_magic("config", "AgentMagics.compact = 'off'")
    shell.run_line_magic("config", "AgentMagics.context_window = 4096")
    shell.run_line_magic("config", "AgentMagics.variables = False")
    configured = parse_cell_line("", kernel_state().defaults)
    assert (configured.compact, configured.context_window, configured.variables) == (
        "off",
        4096,
        False,
    )
    assert parse_cell_line("--compact auto", kernel_state().defaults).compact == "auto"


# -- context window per model ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "window"),
    [
        ("openai:gpt-4.1-mini", 1_047_576),
        ("openai:gpt-4o", 128_000),
        ("openai:o3-mini", 200_000),
        ("openai:o4-mini", 200_000),
        ("openai:gpt-5-mini", 400_000),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("openrouter:anthropic/claude-sonnet-4-5", 200_000),
        ("ollama:llama3.1:8b", 131_072),
        ("ollama:some-local-model", None),
        ("demo", 8_192),
    ],
)
def test_the_bundled_context_windows(label: str, window: int | None) -> None:
    assert context_window_of(label) == window


def test_context_window_option_overrides_the_table_for_the_agent(
    shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    fake_provider.push(FakeReply("one"))
    model = f"fake:local-model@{fake_provider.base_url}"
    cell(shell, f"--model {model} --tools none --context-window 32000 --compact off", "hi")
    settings = agent().compaction
    assert (settings.window, settings.mode) == (32000, "off")


# -- the prompt builder, notes and pins ------------------------------------------------------


def test_the_session_prompt_is_built_once_with_context_memory_and_pins(
    shell: InteractiveShell, fake_provider: FakeProviderServer, tmp_path: Path
) -> None:
    Memory.for_folder(tmp_path).file("user").add("prefers polars over pandas")
    fake_provider.push(FakeReply("one"), FakeReply("two"), FakeReply("three"))
    model = f"fake:m@{fake_provider.base_url}"
    cell(shell, f"--model {model} --tools none --system 'Be brief.'", "first")
    builder = agent().prompt_builder
    assert builder.instructions == "Be brief."
    assert f"Folder: {tmp_path}" in builder.context
    assert "prefers polars over pandas" in builder.memory
    cell(shell, "", "second")
    first, second = (r.body for r in fake_provider.requests[-2:])
    assert first is not None
    assert second is not None
    assert system_of(first) == system_of(second)  # byte-identical: the cache keeps hitting
    assert "prefers polars over pandas" in system_of(second)

    shell.run_line_magic("agent", "pin always answer in French")
    table = shell.run_line_magic("agent", "pins")
    assert [tuple(row) for row in table.rows] == [("1", "always answer in French")]
    cell(shell, "", "third")
    body = fake_provider.requests[-1].body
    assert body is not None
    assert "1. always answer in French" in system_of(body)
    result = shell.run_line_magic("agent", "unpin 1")
    assert "Unpinned: always answer in French" in str(result.text)
    assert agent().prompt_builder.pins == ()


def test_pin_commands_say_what_is_wrong(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="no current session"):
        shell.run_line_magic("agent", "pins")
    cell(shell, "--tools none", "hello")
    for line, said in [
        ("unpin x", "the pin's number"),
        ("unpin 3", "there is no pin 3"),
        ("pin", "nothing to pin"),
    ]:
        with pytest.raises(UsageError, match=said):
            shell.run_line_magic("agent", line)
    assert "Nothing is pinned" in str(shell.run_line_magic("agent", "pins").text)


def test_pins_are_kept_in_the_store_for_a_resume(shell: InteractiveShell) -> None:
    cell(shell, "--tools none", "hello")
    shell.run_line_magic("agent", "pin keep the data in UTC")
    (info,) = kernel_state().store().list()
    shell.run_line_magic("unload_ext", "mibyan_jupyter")
    reset_kernel_state()
    shell.run_line_magic("load_ext", "mibyan_jupyter")
    shell.run_line_magic("agent", f"resume {info.id}")
    cell(shell, "", "again")
    assert agent().prompt_builder.pins == ("keep the data in UTC",)


def test_the_variables_note_names_types_and_shapes_but_no_secrets(
    shell: InteractiveShell,
) -> None:
    shell.run_cell("rows = [1, 2, 3]\napi_key = 'sk-123'\n_hidden = 1\nimport math\n")
    note = variables_note(shell.user_ns, shell)
    assert note is not None
    assert "rows: list len 3" in note
    assert "api_key" not in note
    assert "sk-123" not in note
    assert "_hidden" not in note
    assert "math" not in note
    shell.run_cell("\n".join(f"v{n} = {n}" for n in range(40)))
    many = variables_note(shell.user_ns, shell)
    assert many is not None
    assert "more (list_variables)" in many


def test_the_agent_reads_the_variables_fresh_and_no_variables_turns_it_off(
    shell: InteractiveShell,
) -> None:
    shell.run_cell("frame_like = [[1, 2], [3, 4]]")
    cell(shell, "--tools none", "hello")
    notes = agent().notes
    assert notes is not None
    assert "frame_like" in notes(None)[0]
    shell.run_cell("later = {'a': 1}")
    assert "later: dict len 1" in notes(None)[0]
    cell(shell, "--no-variables", "again")
    assert agent().notes is None


# -- compaction and the memory flush ---------------------------------------------------------


def test_ask_without_a_front_end_behaves_as_auto(shell: InteractiveShell) -> None:
    from mibyan_jupyter.core.compaction import CompactionPlan

    shell.run_line_magic("config", "AgentMagics.headless_wait = 0.05")
    cell(shell, "--tools none --compact ask", "hello")
    confirm = agent().compaction.confirm
    assert confirm is not None  # asks on the view when one renders ...
    plan = CompactionPlan("preflight", 5000, 8192, 30, 1, 20)
    assert asyncio.run(confirm(plan)) is True  # ... and nobody answering means "compact"
    shell.run_line_magic("agent", "compact")  # the real magic: no view, so no question
    shell.run_cell_magic("agent", "--tools none --compact ask", "headless")
    assert agent().compaction.confirm is None


def test_percent_agent_compact_shows_the_receipt(
    shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    model = f"fake:m@{fake_provider.base_url}"
    fake_provider.push(*(FakeReply(f"answer {n}") for n in range(12)))
    cell(shell, f"--model {model} --tools none", "first question")
    for n in range(11):
        cell(shell, "", f"question {n} " + "words " * 50)
    fake_provider.push(FakeReply("The user asked six questions."))
    result = shell.run_line_magic("agent", "compact")
    assert "Compacted the conversation (%agent compact)" in str(result.text)
    assert "messages summarised" in str(result.text)


def test_the_memory_flush_adds_what_the_model_says_is_worth_keeping(
    fake_provider: FakeProviderServer, tmp_path: Path
) -> None:
    memory = Memory(tmp_path / "memory")
    plan = plan_from_options(
        "go",
        parse_cell_line(f"--model fake:m@{fake_provider.base_url}", BUILTIN),
        BUILTIN,
        headless=True,
    )
    flush = memory_flush(plan, memory)
    fake_provider.push(FakeReply("- the sales data is in data/sales.csv\n- prefers seaborn"))
    messages = [UserMessage(content="where is the data?"), AssistantMessage(content="in data/")]
    asyncio.run(flush(messages))
    assert memory.file("memory").entries() == [
        "the sales data is in data/sales.csv",
        "prefers seaborn",
    ]
    body = fake_provider.requests[-1].body
    assert body is not None
    assert "where is the data?" in str(body["messages"])
    assert not body.get("tools")  # tool-less
    fake_provider.push(FakeReply("NONE"))
    asyncio.run(flush(messages))
    assert len(memory.file("memory").entries()) == 2
    assert add_facts(memory, "- prefers seaborn\n- a new fact") == 1  # no duplicates


def test_after_a_compaction_the_notebook_continues_the_child_session(
    shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    model = f"fake:m@{fake_provider.base_url}"
    fake_provider.push(*(FakeReply(f"answer {n}") for n in range(12)))
    cell(shell, f"--model {model} --tools none", "first question")
    for n in range(11):
        cell(shell, "", f"question {n}")
    (parent,) = kernel_state().store().list()
    fake_provider.push(FakeReply("The user asked twelve questions."), FakeReply("after"))
    shell.run_line_magic("agent", "compact")
    cell(shell, "", "next")
    current = kernel_state().current_session(None)
    assert current is not None
    assert current != parent.id
    assert kernel_state().session(current) is not None
    assert kernel_state().store().get(current).parent_id == parent.id


def test_a_cell_whose_run_compacts_keeps_its_own_messages_in_the_transcript(
    shell: InteractiveShell, fake_provider: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's compaction rewrites the transcript in place; the cell's static transcript
    still shows the cell's own prompt and answer (the run's AgentEnd lists them)."""
    from mibyan_jupyter.jupyter.view import AgentView

    finished: list[list[Any]] = []
    real_finish = AgentView.finish

    def recording_finish(self: AgentView, messages: Any, **kwargs: Any) -> None:
        finished.append(list(messages))
        real_finish(self, messages, **kwargs)

    monkeypatch.setattr(AgentView, "finish", recording_finish)
    model = f"fake:m@{fake_provider.base_url}"
    fake_provider.push(*(FakeReply(f"answer {n} " + "x" * 400) for n in range(12)))
    cell(shell, f"--model {model} --tools none", "first question")
    for n in range(11):
        cell(shell, "", f"question {n}")
    fake_provider.push(FakeReply("Summary: twelve questions."), FakeReply("the last answer"))
    cell(shell, "--context-window 1500", "the last question")
    last = finished[-1]
    texts = [str(getattr(m, "content", "")).strip() for m in last]
    assert "the last question" in texts
    assert "the last answer" in texts
    assert kernel_state().store().get(kernel_state().current_session(None) or "").parent_id
