"""A tool printing 100,000 lines: what reaches the front end, how often, and what it costs.

``run_python`` runs ``for i in range(N): print(...)`` (and, as a second case, the same lines
from a child process, ``os.system("seq ...")``, which only the fd-level capture sees) with
the cell's live line attached to a real ``AgentView`` whose comm is replaced by a recording
one, exactly as ``jupyter/cell/run.py`` wires them. The code blocks the thread it runs on,
as in a kernel; the view's timer thread flushes meanwhile. A third case prints 2,000 lines
over about two seconds (``paced``), under the cap, where the throttle sets the pace.

Figures: ``flushes_per_s`` (the most timed messages carrying tool output within any one
second, the goal <= 20; the call's last output goes at once with its result, as text does
at a message's end, and is not counted; ``min_gap_ms`` likewise), ``bytes_to_front_end`` (the comm messages' data as JSON: the live
output is capped per call, so it stays bounded whatever the tool prints),
(only the view's custom messages: the widget's opening, which carries its front-end module,
is the same for every cell), ``cpu_us_per_line`` (process CPU of the whole tool call per line, the reader and timer
threads included) and the same for a bare loop printing to /dev/null
(``baseline_cpu_us_per_line``), so the overhead is the difference. The last line of output
is one JSON object. ``MIBYAN_BENCH_LINES`` scales it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import comm
from comm.base_comm import BaseComm

from mibyan_jupyter.core.events import ToolExecutionEnd, ToolExecutionStart
from mibyan_jupyter.core.messages import ToolMessage
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.core.tools import ToolResult
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools
from mibyan_jupyter.jupyter.kernel_tools.live import LIVE
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

LINES = int(os.environ.get("MIBYAN_BENCH_LINES", "100000"))
HEADER = ViewHeader(
    title="bench", session_id="bench", model="bench", demo=False, context_window=None
)


class Recording:
    """Replaces ``comm.create_comm``: each custom message's time, size and tool output."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, int, bool]] = []

    def create(self, **kwargs: Any) -> BaseComm:
        record = self.sent

        class RecordingComm(BaseComm):
            def publish_msg(self, msg_type: str, data: Any = None, *a: Any, **k: Any) -> None:
                content = (data or {}).get("content")
                if msg_type != "comm_msg" or not isinstance(content, list):
                    return  # the widget's opening (its front-end module): once, not output
                size = len(json.dumps(data, ensure_ascii=False).encode())
                output = isinstance(content, list) and any(
                    isinstance(op, dict) and op.get("op") == "tool_output" for op in content
                )
                record.append((time.monotonic(), size, output))

        return RecordingComm(**kwargs)


def one_case(name: str, code: str, lines: int = LINES) -> dict[str, Any]:
    recording = Recording()
    original = comm.create_comm
    comm.create_comm = recording.create
    try:
        view = AgentView(HEADER)
    finally:
        comm.create_comm = original
    (tool,) = kernel_tools(["python"], namespace={}, root=Path("."), shell=None, on_interrupt=None)
    view(ToolExecutionStart(call_id="c1", name="run_python", args={"code": code}))
    detach = LIVE.attach(view.tool_output)
    cpu, wall = time.process_time(), time.monotonic()
    try:
        running = tool.execute("c1", tool.validate({"code": code}), AbortSignal(), lambda _: None)
        result: Any = asyncio.run(running)  # type: ignore[arg-type]
    finally:
        detach()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    assert isinstance(result, ToolResult)
    message = ToolMessage(tool_call_id="c1", name="run_python", content=result.content)
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=message, is_error=False))
    view.finish([], status="completed")
    output_times = [at for at, _, output in recording.sent if output]
    timed = output_times[:-1]  # the last goes with the result, at once (as text's at its end)
    gaps = [b - a for a, b in itertools.pairwise(timed)]
    return {
        "case": name,
        "lines": lines,
        "seconds": round(wall, 3),
        "flushes": len(output_times),
        "flushes_per_s": max_in_a_second(timed),
        "min_gap_ms": round(min(gaps) * 1000, 1) if gaps else None,
        "bytes_to_front_end": sum(size for _, size, _ in recording.sent),
        "cpu_us_per_line": round(cpu / lines * 1e6, 2),
        "result_chars": len(str(result.content)),
    }


def max_in_a_second(times: list[float]) -> int:
    """The most messages sent within any one second (the throttle's promise: <= 20; the
    last one, sent with the result at the call's end, may come sooner than 50 ms)."""
    best, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= 1.0:
            first += 1
        best = max(best, last - first + 1)
    return best


def baseline() -> float:
    """CPU per line of the same print loop into a plain in-memory stream (no tool)."""
    sink = io.StringIO()
    cpu = time.process_time()
    with contextlib.redirect_stdout(sink):
        for i in range(LINES):
            print("line", i, "of the output, with some words in it")
    return (time.process_time() - cpu) / LINES * 1e6


def main() -> None:
    printing = (
        f"for i in range({LINES}):\n    print('line', i, 'of the output, with some words in it')"
    )
    child = f"import os\nos.system('seq {LINES}')"
    paced = "import time\nfor i in range(2000):\n    print('step', i)\n    time.sleep(0.001)"
    cases = [
        one_case("print", printing),
        one_case("os.system", child),
        one_case("paced", paced, 2000),
    ]
    for case in cases:
        print(
            f"{case['case']:>10}: {case['seconds']:.2f} s, {case['flushes']} flushes "
            f"(at most {case['flushes_per_s']} in a second, min gap {case['min_gap_ms']} ms), "
            f"{case['bytes_to_front_end']:,} bytes to the front end, "
            f"{case['cpu_us_per_line']} us CPU per line"
        )
    head = cases[0]
    summary = {
        "flushes_per_s": max(case["flushes_per_s"] for case in cases),
        "bytes_to_front_end": head["bytes_to_front_end"],
        "cpu_us_per_line": head["cpu_us_per_line"],
        "baseline_cpu_us_per_line": round(baseline(), 2),
        "cases": cases,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
