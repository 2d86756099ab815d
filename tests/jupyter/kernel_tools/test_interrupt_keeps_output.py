"""Kernel > Interrupt during ``run_python`` keeps what the code printed (issue 11, item 2):
the result the model sees is the printed output, redacted, under a line saying the code was
interrupted, not "Tool call cancelled…". Through a real Agent and loop, with the abort the
cell wires (``on_interrupt`` aborts the run) and a real SIGINT to the main thread."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import Agent, AgentEnd, ToolMessage
from mibyan_jupyter.core.fakes import Call, Reply, ScriptedModel
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.core.tools import CANCELLED
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.interrupts import INTERRUPTED
from mibyan_jupyter.jupyter.kernel_tools.live import STOPS

SECRET = "sk-interrupt-0123456789abcdef"
CODE = (
    "import _thread, os, threading, time\n"
    "print('rows loaded: 120')\n"
    "print(os.environ['INTERRUPT_TEST_API_KEY'])\n"
    "os.system('echo from a child')\n"
    "threading.Timer(0.1, _thread.interrupt_main).start()\n"
    "while True:\n    time.sleep(0.005)\n"
)


async def test_interrupt_during_run_python_keeps_the_printed_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INTERRUPT_TEST_API_KEY", SECRET)
    STOPS.take_interrupts()
    model = ScriptedModel([Reply(calls=[Call("run_python", {"code": CODE})]), Reply("never asked")])
    agent: Agent
    (tool,) = kernel_tools(
        ["python"],
        namespace={},
        root=Path("."),
        shell=None,
        on_interrupt=lambda: agent.abort("interrupted (Kernel > Interrupt)"),
    )
    agent = Agent(stream_fn=model, model="scripted", tools=[tool])
    ends: list[Any] = []
    agent.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnd) else None)
    await asyncio.wait_for(agent.prompt("load it"), 20)
    [result] = [m for m in agent.state.messages if isinstance(m, ToolMessage)]
    text = content_text(result.content)
    assert CANCELLED not in text
    assert text.startswith(INTERRUPTED)
    assert "rows loaded: 120" in text
    assert "from a child" in text  # fd-level output too
    assert SECRET not in text
    assert "[redacted]" in text
    assert result.is_error
    assert ends[-1].reason == "aborted"  # the run stops: the model is not asked again
    assert len(model.requests) == 1
    assert STOPS.take_interrupts() == 1  # the cell still ends with its red line
