"""The "python" group: ``run_python``, which runs code in the user's kernel namespace.

What it returns, and to whom:

* the model gets text (what was printed, ``Out: `` and the last expression's value, one
  line per display, the traceback), cleaned and clipped to ~8,000 characters, plus each
  displayed or plotted image as an image part;
* the view, the store and the export get ``details = {"code", "outputs"}``, the outputs
  being nbformat v4 output dicts: the export turns the call into a code cell with exactly
  these outputs (see ``export/render.py``).

Why an async tool: async tools run on the event loop thread, and the code must run there,
like a cell (matplotlib, the display machinery and most user objects are not thread-safe).
The code itself runs synchronously: the kernel is busy while it runs, as with a cell, and
Kernel > Interrupt stops it (see ``interrupts.py``). What it prints, at the file-descriptor
level too (``os.system``, subprocesses, C code: ``fd_capture.py``), is in the result and goes
live to the card through :data:`.live.LIVE`; the Stop button interrupts it through
:data:`.live.STOPS` (the loop thread is the blocked one, so no event could carry either).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mibyan_jupyter.core.messages import ImagePart, ImageUrl, TextPart
from mibyan_jupyter.core.tools import Tool, ToolContext, ToolResult, tool
from mibyan_jupyter.jupyter.kernel_tools.execute import Execution, run_code
from mibyan_jupyter.jupyter.kernel_tools.interrupts import (
    INTERRUPTED,
    STOPPED,
    interrupted,
    interruptible,
    report_after_result,
    stopped,
)
from mibyan_jupyter.jupyter.kernel_tools.live import LIVE, STOPS
from mibyan_jupyter.jupyter.kernel_tools.text import for_model
from mibyan_jupyter.secrets import REDACT

MODEL_IMAGES = 4
"""Images sent to the model per call at most (each costs about a thousand tokens)."""
_TEXT_KEYS = ("text/plain", "text/html", "text/markdown", "text/latex")


def python_tools(
    *,
    namespace: dict[str, Any],
    shell: Any | None,
    on_interrupt: Callable[[], None] | None,
) -> list[Tool]:
    @tool(sequential=True)
    async def run_python(ctx: ToolContext, code: str) -> ToolResult:
        """Run Python code in the user's Jupyter kernel, in the notebook's own namespace: the
        user's variables are available and what you define stays defined. Like a notebook
        cell, it returns what the code prints, the value of its last expression, display()
        output and any new matplotlib figures (as images), or the traceback if it fails.
        The notebook is busy while it runs, so keep each call short.

        Args:
            code: Python source, as in a notebook cell (IPython syntax such as %timeit or
                !ls works when run inside Jupyter).
        """

        echo = LIVE.writer(ctx.call_id)  # the card's live output (None: no view)
        with interruptible() as replaced:
            try:
                with STOPS.blocking():
                    execution = run_code(code, namespace, shell=shell, echo=echo, fds=True)
                    by_stop = STOPS.stopping()
            except KeyboardInterrupt:  # outside the code itself (rendering a figure...)
                if STOPS.stopping():
                    return stopped(code=code)
                return interrupted(on_interrupt, replaced, code=code)
        if execution.interrupted and not by_stop:  # keep what it printed: see the function
            report_after_result(on_interrupt, replaced)
        return python_result(code, execution, stopped=by_stop and execution.interrupted)

    return [run_python]


def python_result(code: str, execution: Execution, *, stopped: bool = False) -> ToolResult:
    """The tool result of one run (see the module docstring); ``stopped``: the Stop button
    interrupted it (the details say so, and the card shows "stopped")."""
    outputs = [_redacted(output) for output in execution.outputs]
    text = model_text(outputs)
    if execution.interrupted:
        text = f"{STOPPED if stopped else INTERRUPTED}\n{text}"
    text = for_model(text)
    images = execution.images
    content: str | tuple[TextPart | ImagePart, ...] = text
    if images:
        parts: list[TextPart | ImagePart] = [TextPart(text=text)]
        parts += [
            ImagePart(image_url=ImageUrl(url=f"data:{mime};base64,{data}"))
            for mime, data in images[:MODEL_IMAGES]
        ]
        if len(images) > MODEL_IMAGES:
            parts.append(TextPart(text=f"({len(images) - MODEL_IMAGES} more images not sent)"))
        content = tuple(parts)
    details: dict[str, object] = {"code": code, "outputs": outputs}
    if stopped:
        details["stopped"] = True
    return ToolResult(content=content, details=details, is_error=execution.error is not None)


def model_text(outputs: list[dict[str, Any]]) -> str:
    """The outputs as one text, in order (images are sent as image parts)."""
    pieces: list[str] = []
    figures = 0
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            text = output["text"]
            pieces.append(text if output["name"] == "stdout" else f"[stderr]\n{text}")
        elif kind == "error":
            pieces.append("\n".join(output["traceback"]))
        else:
            data = output.get("data", {})
            plain = data.get("text/plain")
            if "image/png" in data or "image/jpeg" in data:
                figures += 1
                plain = f"[image {figures}, attached] {plain or ''}".rstrip()
            elif not isinstance(plain, str):
                plain = f"[display of {', '.join(data) or 'nothing'}]"
            pieces.append(f"Out: {plain}" if kind == "execute_result" else plain)
    text = "\n".join(piece.rstrip("\n") for piece in pieces if piece)
    return text or "(the code ran and produced no output)"


def _redacted(output: dict[str, Any]) -> dict[str, Any]:
    """``output`` with known secrets replaced in its text (not in images)."""
    copy = dict(output)
    if "text" in copy:
        copy["text"] = REDACT(copy["text"])
    if "evalue" in copy:
        copy["evalue"] = REDACT(copy["evalue"])
        copy["traceback"] = [REDACT(line) for line in copy["traceback"]]
    data = copy.get("data")
    if isinstance(data, dict):
        copy["data"] = {
            mime: REDACT(value) if mime in _TEXT_KEYS and isinstance(value, str) else value
            for mime, value in data.items()
        }
    return copy
