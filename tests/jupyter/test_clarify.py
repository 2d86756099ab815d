"""The ``clarify`` tool without a front end, through the cell (a real InteractiveShell, the
loopback fake model, a real SQLite file): nobody can see the question, so the tool answers
at once that no one can answer and the model is told to go on with its own judgment; that
text is what the model's next request carries. It never asks for approval first, also
under ``--approve deny``."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.cell.clarify import NO_ONE_CAN_ANSWER
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

QUESTION = {"question": "Which year should I plot?", "choices": ["2023", "2024"]}


def tool_results(body: dict[str, Any] | None) -> list[str]:
    assert body is not None
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def run(shell: InteractiveShell, line: str) -> None:
    result = shell.run_cell(f"%%agent {line}\nPlot the sales.\n")
    assert result.error_in_exec is None, result.error_in_exec


def calls(tmp_path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as db:
        return db.execute("SELECT name, status, requested_at, decision FROM tool_calls").fetchall()


@pytest.mark.parametrize("approve", ["", "--approve deny"])
def test_no_front_end_within_the_wait_answers_that_no_one_can(
    loaded_shell: InteractiveShell, fake_provider: FakeProviderServer, tmp_path: Path, approve: str
) -> None:
    loaded_shell.run_line_magic("config", "AgentMagics.headless_wait = 0.3")
    fake_provider.push(FakeReply(calls=[FakeCall("clarify", QUESTION)]), FakeReply("2024 then."))
    began = time.monotonic()
    run(loaded_shell, f"--model fake:m@{fake_provider.base_url} --tools clarify {approve}")
    assert time.monotonic() - began < 10
    first, second = (r.body for r in fake_provider.requests[-2:])
    assert first is not None
    assert [t["function"]["name"] for t in first["tools"]] == ["clarify"]
    assert tool_results(second) == [NO_ONE_CAN_ANSWER]
    assert "proceed on your own judgment" in NO_ONE_CAN_ANSWER
    assert calls(tmp_path) == [("clarify", "done", None, None)], "no approval was asked"


def test_the_blocking_cell_magic_answers_at_once(
    loaded_shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    """The cell magic called synchronously is headless from the start: no wait at all."""
    loaded_shell.run_line_magic("config", "AgentMagics.headless_wait = 30")
    fake_provider.push(FakeReply(calls=[FakeCall("clarify", QUESTION)]), FakeReply("ok"))
    began = time.monotonic()
    loaded_shell.run_cell_magic(
        "agent", f"--model fake:m@{fake_provider.base_url} --tools default,clarify", "Plot it."
    )
    assert time.monotonic() - began < 10, "it did not wait the 30 s headless wait"
    assert tool_results(fake_provider.requests[-1].body) == [NO_ONE_CAN_ANSWER]


def test_too_many_choices_is_an_error_the_model_can_act_on(
    loaded_shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    many = {"question": "Which?", "choices": [f"option {n}" for n in range(13)]}
    fake_provider.push(FakeReply(calls=[FakeCall("clarify", many)]), FakeReply("fine"))
    run(loaded_shell, f"--model fake:m@{fake_provider.base_url} --tools clarify")
    (said,) = tool_results(fake_provider.requests[-1].body)
    assert "at most 12 choices (got 13)" in said
    schema = json.dumps(fake_provider.requests[-2].body)
    assert "at most 12" in schema, "the schema tells the model the limit"
