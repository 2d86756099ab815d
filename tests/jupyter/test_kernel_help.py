"""``%%agent --help`` alone in a cell, in a real ipykernel: the README and ``%agent`` both
advertise it, and IPython refuses a cell magic with an empty body before the magic runs,
so the input transformer answers it. ``%agent?`` shows the commands, not "no docstring"."""

from __future__ import annotations

import pytest
from kernel_driver import Execution, KernelDriver

from mibyan_jupyter.jupyter.cell.options import CELL_FLAGS
from mibyan_jupyter.jupyter.commands.reference import REFERENCE

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]


def ok(execution: Execution) -> str:
    assert (execution.reply or {}).get("status") == "ok", (execution.reply, execution.text())
    return execution.text()


def test_help_alone_in_a_cell_and_the_line_magic_help(kernel: KernelDriver) -> None:
    for cell in ("%%agent --help", "%%agent -h\n", "%%agent --help\n\n"):
        text = ok(kernel.run(cell))
        assert "cell body is empty" not in text
        assert all(flag in text for flag in CELL_FLAGS), (cell, text)
    execution = kernel.run("%agent?")
    ok(execution)
    # pinfo pages its text: the payload of the reply, or a stream where no pager is used
    payload = (execution.reply or {}).get("payload", [])
    paged = " ".join(str(p.get("data", {}).get("text/plain", "")) for p in payload)
    shown = paged + execution.text()
    assert "no docstring" not in shown
    assert all(f"%agent {entry.name}" in shown for entry in REFERENCE), shown
    assert "%agent export" in ok(kernel.run("%agent help"))
    # nothing ran: no session was stored (the database is opened by the first run)
    assert not kernel.db_path.exists() or kernel.query("SELECT count(*) FROM sessions") == [(0,)]
