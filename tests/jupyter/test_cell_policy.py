"""The admin policy on ``%%agent`` cells in a real InteractiveShell: exam mode, an
untrusted policy file, models, tool groups, ``--approve auto``, approval floors and daily
caps, each refused or narrowed in one line and recorded in the audit trail; and
``%agent review`` for a course's instructor (a student is refused).

The policy file is root-owned in the test's folder (the tests run as root) and reaches the
kernel the one way the environment may: ``MIBYAN_POLICY`` adds it. The same paths from a
real kernel running as a non-root user: test_kernel_policy.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from policy_support import write_policy

from mibyan_jupyter.jupyter.cell.plan import plan_cell
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.store import audit
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply, FakeUsage

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a trusted policy file is root's")

ROSTER = """
[review]
reviewable = true
[courses.stats101]
instructors = ["prof"]
students = ["alice", "bob"]
"""


@pytest.fixture
def shell(loaded_shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    return loaded_shell


@pytest.fixture
def policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where this test's admin policy is written (``write_policy``)."""
    path = tmp_path / "policy.toml"
    monkeypatch.setenv("MIBYAN_POLICY", str(path))
    return path


def error_of(shell: InteractiveShell, cell: str) -> str:
    result = shell.run_cell(cell)
    assert result.error_in_exec is not None, "the cell was not refused"
    return str(result.error_in_exec)


def kinds() -> list[str]:
    return [row.kind for row in audit.rows(kernel_state().store().db.conn)]


def test_exam_mode_refuses_every_cell_with_the_admins_message(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, '[exam]\nenabled = true\nmessage = "No AI during the midterm."\n')
    assert error_of(shell, "%%agent --model demo\nhello\n") == (
        "exam mode: No AI during the midterm."
    )
    assert kinds() == ["exam_refusal", "policy_change"]
    write_policy(policy, "[exam]\nenabled = false\n")
    assert shell.run_cell("%%agent --model demo --tools none\nhello\n").error_in_exec is None
    assert kinds()[0] == "policy_change"  # the admin's change is recorded once it is seen


def test_a_policy_file_the_user_could_write_turns_the_agent_off(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, "")
    os.chown(policy, 1000, 1000)
    message = error_of(shell, "%%agent --model demo\nhello\n")
    assert message.startswith(f"the agent is off: the admin policy {policy} is owned by uid 1000")
    assert "ask your admin" in message
    assert kinds() == ["policy_denial"]


def test_a_model_the_policy_does_not_allow_is_refused_before_any_call(
    shell: InteractiveShell, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    write_policy(policy, '[models]\nproviders = ["anthropic"]\n')
    message = error_of(shell, "%%agent --model openai:gpt-4.1-mini\nhello\n")
    assert message == (
        "the admin policy refuses this cell: provider openai is not allowed (allowed: anthropic)"
    )
    shell.run_line_magic("config", "AgentMagics.model = 'openai:gpt-4.1-mini'")  # %config too
    assert "provider openai is not allowed" in error_of(shell, "%%agent\nhello\n")


def test_tool_groups_turned_off_and_approve_auto_are_narrowed(
    shell: InteractiveShell, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_policy(
        policy, '[tools]\ndisabled = ["shell", "mcp"]\n[approval]\nallow_auto_approve = false\n'
    )
    defaults = kernel_state().defaults
    plan = plan_cell(
        "hi", "--model demo --tools python,shell --approve auto", defaults, headless=True
    )
    assert plan.groups == ("python",)
    assert plan.options.approve == "ask"
    err = capsys.readouterr().err
    assert "the admin policy turns off tool group(s) shell; this cell runs without them" in err
    assert "does not allow --approve auto" in err
    assert kinds().count("policy_denial") == 2


def test_an_always_asked_tool_is_asked_despite_auto_and_saved_rules(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, '[approval]\nalways_ask = ["run_shell"]\n')
    shell.run_line_magic("agent", "policy set run_shell allow")  # a saved "always" rule
    shell.run_cell_magic(  # the real magic is headless: nobody can click, so: denied
        "agent", "--model demo --tools shell --approve auto", "Use run_shell:\n```sh\necho hi\n```"
    )
    rows = (
        kernel_state()
        .store()
        .db.conn.execute("SELECT name, decision, decided_by FROM tool_calls")
        .fetchall()
    )
    assert rows == [("run_shell", "denied", "policy")]
    (approval,) = audit.rows(kernel_state().store().db.conn, kind="approval")
    assert approval.user_name == "alice"
    assert approval.detail["tool"] == "run_shell"
    assert approval.detail["decided_by"] == "policy"
    assert approval.detail["approved"] is False


def spend(amount: float) -> None:
    """Usage billed to alice today, as an earlier cell's would be."""
    store = kernel_state().store()
    session = store.create("earlier").id
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, input_tokens, output_tokens, cost, created_at)"
            " VALUES (?, 100, 50, ?, ?)",
            (session, amount, time.time()),
        )


def test_a_used_up_daily_cap_refuses_with_limit_value_and_reset(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, "[caps]\ndaily_cost_per_user = 0.5\n")
    spend(0.6)
    message = error_of(shell, "%%agent --model demo\nhello\n")
    assert message.startswith(
        "your daily cost cap ($0.50, admin policy) is used up ($0.60 today); it resets at "
        "00:00 UTC (in "
    )
    (hit,) = audit.rows(kernel_state().store().db.conn, kind="cap_hit")
    assert hit.detail["value"] == 0.5


def test_what_is_left_of_the_cap_becomes_the_cells_budget(
    shell: InteractiveShell, policy: Path
) -> None:
    write_policy(policy, "[caps]\ndaily_cost_per_user = 1.0\ndaily_tokens_per_user = 1000\n")
    spend(0.4)
    defaults = kernel_state().defaults
    plan = plan_cell("hi", "--model demo --max-cost 5", defaults, headless=True)
    assert plan.budget.max_cost == pytest.approx(0.6)
    assert plan.budget.max_total_tokens == 850
    assert plan.gate.limits.max_cost == pytest.approx(0.6)
    smaller = plan_cell("hi", "--model demo --max-cost 0.1", defaults, headless=True)
    assert smaller.budget.max_cost == pytest.approx(0.1)  # the cell's own, when smaller


def test_review_is_for_the_courses_instructors(
    shell: InteractiveShell, policy: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_policy(policy, ROSTER)
    shell.run_cell("%%agent --model demo --tools none\nWhat is a confidence interval?\n")
    error = shell.run_cell("%agent review").error_in_exec  # alice, a student
    assert "only a course's instructors can review, and the roster names alice in none" in str(
        error
    )
    monkeypatch.setenv("JUPYTERHUB_USER", "prof")
    table = repr(shell.run_line_magic("agent", "review --course stats101"))
    assert "alice" in table
    assert "confidence interval" in table
    searched = repr(shell.run_line_magic("agent", "review --search nothing-like-this"))
    assert "alice" not in searched
    audit_table = repr(shell.run_line_magic("agent", "review --audit"))
    assert "policy_change" in audit_table
    out = tmp_path / "appendix"
    done = repr(shell.run_line_magic("agent", f"review --user alice --export {out}"))
    assert "Wrote 1 session(s) of alice" in done
    index = (out / "alice-appendix.md").read_text(encoding="utf-8")
    assert index.startswith("# AI use appendix: alice")
    (exported,) = [p for p in out.iterdir() if p.name != "alice-appendix.md"]
    text = exported.read_text(encoding="utf-8")
    assert "confidence interval" in text
    # The export says the session was reviewable, as the live header did.
    assert "*Your instructors can review this conversation (the admin policy says so)*" in text
    shell.run_line_magic("agent", f"review --user alice --export {out} --format ipynb")
    (ipynb,) = out.glob("*.ipynb")
    assert "Your instructors can review this conversation" in ipynb.read_text(encoding="utf-8")
    error = shell.run_cell("%agent review --course art").error_in_exec
    assert "you are not an instructor of 'art'" in str(error)


def test_a_cap_reached_during_a_run_summarizes_and_is_never_raised(
    shell: InteractiveShell,
    policy: Path,
    fake_provider: FakeProviderServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_policy(policy, "[caps]\ndaily_tokens_per_user = 3000\n")
    fake_provider.push(
        FakeReply(calls=[FakeCall("list_variables", {})], usage=FakeUsage(input=2500, output=300)),
        FakeReply("Summary of the work."),
        FakeReply("never sent"),
    )
    model = f"fake:m@{fake_provider.base_url}"
    result = shell.run_cell(f"%%agent --model {model} --tools inspect\nlook around\n")
    assert result.error_in_exec is None, result.error_in_exec
    err = capsys.readouterr().err
    assert "your daily token cap (3,000 tokens, admin policy) is reached; it resets at " in err
    (hit,) = audit.rows(kernel_state().store().db.conn, kind="cap_hit")
    assert hit.detail["limit"] == "total_tokens"
    assert len(fake_provider.requests) <= 2  # the turn and at most the one summary


def test_what_calls_the_model_without_a_cell_can_ask_first(
    shell: InteractiveShell, policy: Path
) -> None:
    from mibyan_jupyter.jupyter.cell.admission import PolicyRefusal, ensure_allowed

    write_policy(policy, "[review]\nreviewable = true\n")
    allowed = ensure_allowed()
    assert allowed is not None
    assert allowed.review.reviewable
    write_policy(policy, '[exam]\nenabled = true\nmessage = "Exam."\n')
    with pytest.raises(PolicyRefusal, match=r"exam mode: Exam\."):
        ensure_allowed()


def test_exam_mode_refuses_compact_now_too(shell: InteractiveShell, policy: Path) -> None:
    """``%agent compact`` calls the model without a cell plan: exam mode refuses it too."""
    write_policy(policy, "[exam]\nenabled = false\n")
    assert shell.run_cell("%%agent --model demo --tools none\nhello\n").error_in_exec is None
    write_policy(policy, '[exam]\nenabled = true\nmessage = "Closed books."\n')
    assert error_of(shell, "%agent compact") == "exam mode: Closed books."
    assert kinds()[0] == "exam_refusal"
