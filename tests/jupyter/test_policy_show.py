"""What a student reads about the admin policy: ``%agent policy`` lists every floor in
force, one row each marked "(admin policy)", next to the saved rules it sets aside; and
the static transcript at a run's end carries the reviewable line the live header showed.

In a real InteractiveShell with the extension loaded; the policy is a root-owned file
added by ``MIBYAN_POLICY`` (the tests run as root, as test_cell_policy.py's do)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from policy_support import write_policy

from mibyan_jupyter.core.messages import AssistantMessage, UserMessage
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript
from mibyan_jupyter.jupyter.commands.tables import Table
from mibyan_jupyter.jupyter.state import kernel_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a trusted policy file is root's")

EVERY_FLOOR = """
[approval]
always_ask = ["run_shell"]
allow_always_rules = false
allow_auto_approve = false
[tools]
disabled = ["mcp", "files"]
[models]
allowed = ["openai:gpt-4.1-*"]
providers = ["openai"]
[caps]
daily_cost_per_user = 1.0
daily_tokens_per_user = 1000
[exam]
enabled = true
message = "Closed books until 11:00."
[review]
reviewable = true
retention_days = 30
[courses.stats101]
instructors = ["prof"]
students = ["alice"]
"""


@pytest.fixture
def shell(loaded_shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    return loaded_shell


@pytest.fixture
def policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "policy" / "policy.toml"
    path.parent.mkdir(mode=0o755)
    monkeypatch.setenv("MIBYAN_POLICY", str(path))
    return path


def shown(shell: InteractiveShell, line: str = "policy") -> Table:
    table = shell.run_line_magic("agent", line)
    assert isinstance(table, Table)
    return table


def spend(cost: float, tokens: int) -> None:
    """Usage billed to alice today, as an earlier cell's would be."""
    store = kernel_state().store()
    session = store.create("earlier").id
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, input_tokens, output_tokens, cost, created_at)"
            " VALUES (?, ?, 0, ?, ?)",
            (session, tokens, cost, time.time()),
        )


def test_without_a_policy_file_nothing_is_marked(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MIBYAN_POLICY", raising=False)
    shell.run_line_magic("agent", "policy set run_python allow")
    table = shown(shell)
    assert table.rows == [["run_python", "allow", "always (saved)"]]
    assert "admin policy" not in repr(table) + table.note


def test_every_floor_in_force_is_one_marked_row(shell: InteractiveShell, policy: Path) -> None:
    shell.run_line_magic("agent", "policy set run_shell allow")  # before the admin's file
    shell.run_line_magic("agent", "policy set run_python allow")
    write_policy(policy, EVERY_FLOOR)
    spend(0.4, 150)
    table = shown(shell)
    rows = [tuple(row) for row in table.rows]
    marked = "(admin policy)"
    assert sorted(rows[:2]) == [
        (
            "run_python",
            "ignored",
            f"always (saved); the admin policy allows no always rules {marked}",
        ),
        ("run_shell", "allow", f"always (saved); not applied: asked every time {marked}"),
    ]
    reset = rows[8][2].split("resets at ")[1]
    assert reset.startswith("00:00 UTC (in ")
    assert rows[2:] == [
        ("run_shell", "ask", f"every time: no --approve auto, no remembered answer {marked}"),
        ("always rules", "off", f"an always click counts for the session {marked}"),
        ("--approve auto", "off", f"tools ask as without it {marked}"),
        ("tool groups mcp, files", "off", f"no cell gets them {marked}"),
        ("models", "only openai:gpt-4.1-*", f"any other is refused {marked}"),
        ("providers", "only openai", f"any other is refused {marked}"),
        ("cost cap", "$1.00 a day", f"$0.60 left today; resets at {reset}"),
        ("token cap", "1,000 tokens a day", f"850 left today; resets at {reset}"),
        ("exam mode", "on", f"the agent is off: Closed books until 11:00. {marked}"),
        ("review", "on", f"your instructors (stats101) can review your conversations {marked}"),
        ("retention", "30 days", f"older sessions are purged {marked}"),
    ]
    assert reset.endswith(marked)
    assert "only root can change" in table.note
    again = shown(shell, "policy set run_shell allow")  # what a student tries next
    assert sorted(tuple(row) for row in again.rows) == sorted(rows)


def test_a_policy_the_user_could_write_says_the_agent_is_off(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, "[exam]\nenabled = false\n", mode=0o666)
    table = shown(shell)
    ((what, decision, why),) = table.rows
    assert (what, decision) == ("the agent", "off")
    assert str(policy) in why
    assert why.endswith("(admin policy)")


def test_the_static_transcript_says_the_conversation_is_reviewable() -> None:
    line = "Your instructors can review this conversation (the admin policy says so)"
    messages = [UserMessage(content="hi"), AssistantMessage(content="Hello.")]
    meta = SessionMeta(id="abc", title="t", model="demo")
    bundle = render_transcript(messages, session=meta, status="completed", reviewable=line)
    assert 'class="mibyan-reviewable"' in bundle["text/html"]
    assert line in bundle["text/html"]
    assert f"*{line}*" in bundle["text/markdown"]
    assert line in bundle["text/plain"].splitlines()
    plain = render_transcript(messages, session=meta, status="completed")
    assert "review" not in plain["text/html"] + plain["text/markdown"]


def test_a_cells_transcript_keeps_the_reviewable_line(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, "[review]\nreviewable = true\n")
    with capture_output() as captured:
        shell.run_cell("%%agent --model demo --tools none\nWhat is a p-value?\n")
    html = "".join(out.data.get("text/html", "") for out in captured.outputs)
    assert "mibyan-transcript" in html
    assert "Your instructors can review this conversation" in html
