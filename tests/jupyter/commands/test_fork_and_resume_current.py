"""``%agent fork`` and ``%agent resume current`` do what they say: after a fork the next
``%%agent`` cell continues the fork (it used to start a new session), and ``resume current``
reopens this notebook's session (it used to fail with "no session 'current'"). A real
IPython shell with the extension loaded, the demo model, a real SQLite file."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.jupyter.state import kernel_state


def run(shell: InteractiveShell, source: str) -> None:
    result = shell.run_cell(source)
    assert result.error_in_exec is None, result.error_in_exec
    assert result.error_before_exec is None, result.error_before_exec


def current() -> str:
    session = kernel_state().current_session(None)
    assert session is not None
    return session


def test_the_next_cell_continues_the_fork(loaded_shell: InteractiveShell) -> None:
    run(loaded_shell, "%%agent --model demo\nhello")
    run(loaded_shell, "%%agent\nand again")
    original = current()
    store = kernel_state().store()
    before = store.get(original).message_count
    run(loaded_shell, "%agent fork current --at 2")
    fork = current()
    assert fork != original
    assert store.get(fork).parent_id == original
    run(loaded_shell, "%%agent\nnow in the fork")
    assert current() == fork, "the cell after a fork continues the fork"
    assert store.get(fork).message_count > 2
    assert store.get(original).message_count == before, "the original is untouched"


def test_resume_current_reopens_this_notebooks_session(loaded_shell: InteractiveShell) -> None:
    run(loaded_shell, "%%agent --model demo\nhello")
    session = current()
    run(loaded_shell, "%agent resume current")
    assert current() == session
    run(loaded_shell, "%%agent\nmore")
    assert current() == session
