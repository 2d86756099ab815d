"""The paths designed for configuration refuse code inside an agent run, in a real
InteractiveShell: ``%agent policy``, ``%config AgentMagics.*``, ``MIBYAN_APPROVE`` and the
store's rules API. "Code the agent ran" is code compiled under run_python's file name
(``<agent-python-N>``, what jupyter/kernel_tools/execute.py uses), exactly as run_python
runs it; "a run in progress" is a run the kernel state holds. The real runs are in
test_kernel_escalation.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.cell.options import parse_cell_line
from mibyan_jupyter.jupyter.guard import RefusedInsideRun, SettingRefused
from mibyan_jupyter.jupyter.kernel_tools.execute import FILENAME_PREFIX, run_code
from mibyan_jupyter.jupyter.state import ActiveRun, kernel_state
from mibyan_jupyter.store.approval_rules import RuleWriteRefused


@pytest.fixture
def shell(loaded_shell: InteractiveShell) -> InteractiveShell:
    return loaded_shell


def as_tool(shell: InteractiveShell, code: str) -> str:
    """Run ``code`` as run_python does; its error as ``ename: evalue`` ("" when none)."""
    execution = run_code(code, shell.user_ns, shell=shell)
    error = execution.error
    return "" if error is None else f"{error['ename']}: {error['evalue']}"


def saved() -> dict[str, bool]:
    return kernel_state().store().always_rules()


def test_the_guard_knows_run_pythons_file_name() -> None:
    from mibyan_jupyter.jupyter.guard import TOOL_CODE_PREFIX

    assert TOOL_CODE_PREFIX == FILENAME_PREFIX


def test_policy_set_from_a_users_cell_is_saved_as_the_cells(shell: InteractiveShell) -> None:
    shell.run_line_magic("agent", "policy set run_shell allow")
    assert saved() == {"run_shell": True}
    (rule,) = kernel_state().store().approval_rules.rows()
    assert (rule.origin, rule.trusted) == ("cell", True)


def test_policy_set_from_tool_code_is_refused(shell: InteractiveShell) -> None:
    outcome = as_tool(shell, "%agent policy set run_shell allow")
    assert outcome.startswith("RefusedInsideRun: %agent policy set")
    assert "code an agent ran" in outcome
    assert saved() == {}
    outcome = as_tool(shell, "get_ipython().run_line_magic('agent', 'policy reset')")
    assert "RefusedInsideRun" in outcome


def test_a_function_tool_code_left_behind_is_refused_later(shell: InteractiveShell) -> None:
    code = "def later():\n    get_ipython().run_line_magic('agent', 'policy set run_shell allow')"
    assert as_tool(shell, code) == ""
    with pytest.raises(RefusedInsideRun):
        shell.user_ns["later"]()  # no run in progress now: the function's frames betray it
    assert saved() == {}


def test_policy_set_during_a_run_is_refused_whoever_calls(shell: InteractiveShell) -> None:
    state = kernel_state()
    loop = asyncio.new_event_loop()
    task = loop.create_task(asyncio.sleep(0))
    state.begin_run(ActiveRun("s1", None, task, None, 0.0, "demo"))  # type: ignore[arg-type]
    try:
        with pytest.raises(RefusedInsideRun, match="run is in progress"):
            shell.run_line_magic("agent", "policy set run_shell allow")
        shell.run_line_magic("agent", "policy")  # showing is fine
    finally:
        state.end_run("s1")
        loop.run_until_complete(task)
        loop.close()
    assert saved() == {}


def test_config_from_tool_code_is_refused_and_kept(shell: InteractiveShell) -> None:
    magics = kernel_state().defaults
    outcome = as_tool(shell, "%config AgentMagics.approve = 'auto'")
    assert outcome == ""  # %config reports a refused value as a logged line, not a raise
    assert magics.approve == "ask"
    outcome = as_tool(shell, "get_ipython().magics_manager.registry['AgentMagics'].tools = 'all'")
    assert outcome.startswith("SettingRefused: %config AgentMagics.tools")
    assert magics.tools == "inspect,python,files"
    outcome = as_tool(shell, "get_ipython().magics_manager.registry['AgentMagics'].max_cost = 99.0")
    assert "SettingRefused" in outcome
    shell.run_line_magic("config", "AgentMagics.approve = 'auto'")  # the user's own cell
    assert magics.approve == "auto"


def test_a_refused_setting_is_a_trait_error() -> None:
    from traitlets import TraitError

    assert issubclass(SettingRefused, TraitError)


def test_the_rules_api_refuses_tool_code(shell: InteractiveShell) -> None:
    code = (
        "from mibyan_jupyter.jupyter.state import kernel_state\n"
        "kernel_state().store().save_always_rule('run_shell', True)"
    )
    outcome = as_tool(shell, code)
    assert outcome.startswith("RuleWriteRefused: saving an 'always' rule")
    assert saved() == {}
    with pytest.raises(RuleWriteRefused):
        exec(compile(code, f"{FILENAME_PREFIX}7>", "exec"), {})


def test_mibyan_approve_is_read_as_the_extension_loaded_it(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kernel_state().approve_env == ""
    monkeypatch.setenv("MIBYAN_APPROVE", "auto")  # what approved code can do
    assert parse_cell_line("", kernel_state().defaults).approve == "ask"
    assert parse_cell_line("", kernel_state().defaults).approve == "ask"
    told = capsys.readouterr().err
    assert told.count("MIBYAN_APPROVE is now 'auto'") == 1, told
    assert "ignored" in told


@pytest.fixture
def approve_env_at_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MIBYAN_APPROVE", "deny")
    yield
    os.environ.pop("MIBYAN_APPROVE", None)


def test_mibyan_approve_set_before_the_extension_loads_is_used(
    approve_env_at_load: None, shell: InteractiveShell
) -> None:
    assert parse_cell_line("", kernel_state().defaults).approve == "deny"
    assert parse_cell_line("--approve ask", kernel_state().defaults).approve == "ask"


def test_unloading_from_tool_code_is_refused(shell: InteractiveShell) -> None:
    outcome = as_tool(shell, "%unload_ext mibyan_jupyter")
    assert "RefusedInsideRun" in outcome
    assert kernel_state().defaults is shell.magics_manager.registry["AgentMagics"]


def test_a_refused_config_value_does_not_come_back_with_a_reload(shell: InteractiveShell) -> None:
    as_tool(shell, "%config AgentMagics.thinking = 'high'")  # %config also merges it upward
    assert shell.config.AgentMagics.get("thinking") == "high"
    shell.run_line_magic("reload_ext", "mibyan_jupyter")  # the user, later
    assert kernel_state().defaults.thinking == "off"
    assert "thinking" not in shell.config.AgentMagics
