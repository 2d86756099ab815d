"""The README's example runs as written and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    match = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert match, "the README has no Python example"
    exec(compile(match.group(1), str(README), "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "It is 3."
    assert lines[0].startswith("type='agent_start'")


def test_readme_quick_start_is_the_two_make_commands() -> None:
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci
