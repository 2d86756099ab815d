"""The "notebook" group: the agent reads and edits the notebook it runs in.

``list_cells`` and ``read_cell`` only read (no approval); ``insert_cell``,
``replace_cell_source``, ``delete_cell`` and ``run_cell`` change the notebook or run code, so
they ask under the default policy (their cards show a diff or the code: ``notebook_risk.py``).
Cells are addressed by their nbformat id, never only by index: an index shifts under the
user's own edits while the agent works, an id does not.

Every request goes to the front-end extension over ``notebook_comm.py`` (it owns the
notebook model); without one the tools answer with one clear error (:data:`HEADLESS`).

Why ``run_cell`` runs the code here: the ``%%agent`` cell is still executing, so the kernel
cannot take another execute request until the run ends. The cell's source runs the way
``run_python`` runs code (``execute.py``: the user's namespace, the same capture, Stop and
Kernel > Interrupt), and the front end writes the outputs and an execution count (the
``%%agent`` cell's own In[n]) into the cell, so the notebook shows what happened. Cells the agent inserted or ran carry
``metadata.mibyan = {"session", "message"}`` (the session and the tool call's id).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mibyan_jupyter.core.messages import ImagePart, ImageUrl, TextPart
from mibyan_jupyter.core.tools import Tool, ToolContext, ToolResult, tool
from mibyan_jupyter.jupyter.kernel_tools.execute import run_code
from mibyan_jupyter.jupyter.kernel_tools.interrupts import (
    interrupted,
    interruptible,
    report_after_result,
    stopped,
)
from mibyan_jupyter.jupyter.kernel_tools.live import LIVE, STOPS
from mibyan_jupyter.jupyter.kernel_tools.notebook_comm import (
    LINK,
    NotebookLink,
    NotebookToolError,
)
from mibyan_jupyter.jupyter.kernel_tools.python_tool import MODEL_IMAGES, model_text, python_result
from mibyan_jupyter.jupyter.kernel_tools.text import for_model, plural

HEAD = 80
"""Characters of each cell's source in ``list_cells``."""
SessionOf = Callable[[], str | None]


def current_session() -> str | None:
    """The session of the run in progress (a kernel runs one ``%%agent`` cell at a time)."""
    from mibyan_jupyter.jupyter.state import kernel_state

    runs = kernel_state().active_runs()
    return runs[0].session_id if len(runs) == 1 else None


def notebook_tools(
    *,
    namespace: dict[str, Any],
    shell: Any | None,
    on_interrupt: Callable[[], None] | None,
    link: NotebookLink = LINK,
    session: SessionOf = current_session,
) -> list[Tool]:
    def mark(ctx: ToolContext) -> dict[str, Any]:
        return {"session": session(), "message": ctx.call_id}

    @tool(side_effects=False)
    async def list_cells() -> ToolResult:
        """List the notebook's cells: id, index, type, the start of the source, execution
        count and a summary of the outputs. Address cells by their id in the other tools."""
        return await _answer(link, "list", {}, _cells_text)

    @tool(side_effects=False)
    async def read_cell(cell_id: str) -> ToolResult:
        """Read one cell of the notebook: its whole source and its outputs (text, and
        images as images).

        Args:
            cell_id: the cell's id, as list_cells shows it.
        """
        return await _answer(link, "read", {"cell_id": cell_id}, _cell_result)

    @tool(sequential=True)  # edits land in call order (a sequential batch)
    async def insert_cell(
        ctx: ToolContext,
        source: str,
        cell_type: str = "code",
        below: str | None = None,
        above: str | None = None,
    ) -> ToolResult:
        """Insert a new cell into the notebook (it is not run; use run_cell for that).

        Args:
            source: the cell's text.
            cell_type: "code" or "markdown".
            below: insert below the cell with this id.
            above: insert above the cell with this id (neither: at the end).
        """
        if cell_type not in ("code", "markdown"):
            return _error(f"cell_type must be 'code' or 'markdown', not {cell_type!r}")
        if below and above:
            return _error("give below or above, not both")
        args: dict[str, Any] = {"source": source, "cell_type": cell_type, "metadata": mark(ctx)}
        args |= {"below": below, "above": above}
        return await _answer(link, "insert", args, _inserted)

    @tool(sequential=True)
    async def replace_cell_source(ctx: ToolContext, cell_id: str, source: str) -> ToolResult:
        """Replace the whole source of a cell with new text (its outputs stay until it runs
        again). Read the cell first: the user sees a diff of the change.

        Args:
            cell_id: the cell's id.
            source: the new text of the whole cell.
        """
        args: dict[str, Any] = {"cell_id": cell_id, "source": source, "metadata": mark(ctx)}
        if cell_id in link.sources:  # what the approval card's diff was made from
            args["expected"] = link.sources[cell_id]
        return await _answer(link, "replace", args, lambda r: f"Replaced the source of {cell_id}.")

    @tool(sequential=True)
    async def delete_cell(cell_id: str) -> ToolResult:
        """Delete a cell from the notebook (the user can undo it in the notebook's editor).

        Args:
            cell_id: the cell's id.
        """
        return await _answer(link, "delete", {"cell_id": cell_id}, lambda r: f"Deleted {cell_id}.")

    @tool(sequential=True)
    async def run_cell(ctx: ToolContext, cell_id: str) -> ToolResult:
        """Run a code cell of the notebook in the user's kernel and return its outputs;
        the cell shows them too. The notebook is busy while it runs: keep it short.

        Args:
            cell_id: the id of a code cell.
        """
        try:
            cell = await link.request("read", {"cell_id": cell_id, "outputs": False})
        except NotebookToolError as error:
            return _error(str(error))
        if not isinstance(cell, dict) or cell.get("type") != "code":
            return _error(f"{cell_id} is not a code cell: only code cells run")
        if cell.get("running"):
            return _error(f"{cell_id} is running now (the agent's own cell, or queued behind it)")
        code = str(cell.get("source", ""))
        result = _execute(ctx, code, namespace, shell, on_interrupt)
        if isinstance(result.details, dict):  # the export makes the code a code cell
            result.details.update(code=code, cell_id=cell_id)
        outputs = result.details["outputs"] if isinstance(result.details, dict) else []
        shown = {"cell_id": cell_id, "outputs": outputs, "metadata": mark(ctx)}
        shown["execution_count"] = agent_cell_count(shell)
        try:
            await link.request("outputs", shown)
        except NotebookToolError as error:
            note = TextPart(text=f"(The cell ran, but the notebook did not show it: {error})")
            parts = result.content if isinstance(result.content, tuple) else (result.content,)
            content = (*(_part(p) for p in parts), note)
            return ToolResult(content=content, details=result.details, is_error=result.is_error)
        return result

    return [list_cells, read_cell, insert_cell, replace_cell_source, delete_cell, run_cell]


def _execute(
    ctx: ToolContext,
    code: str,
    namespace: dict[str, Any],
    shell: Any | None,
    on_interrupt: Callable[[], None] | None,
) -> ToolResult:
    """The cell's code run as ``run_python`` runs it (python_tool.py): on the loop thread,
    live to the card, stoppable by Stop and Kernel > Interrupt."""
    echo = LIVE.writer(ctx.call_id)
    with interruptible() as replaced:
        try:
            with STOPS.blocking():
                execution = run_code(code, namespace, shell=shell, echo=echo, fds=True)
                by_stop = STOPS.stopping()
        except KeyboardInterrupt:
            if STOPS.stopping():
                return stopped(code=code)
            return interrupted(on_interrupt, replaced, code=code)
    if execution.interrupted and not by_stop:  # as run_python: keep what it printed
        report_after_result(on_interrupt, replaced)
    return python_result(code, execution, stopped=by_stop and execution.interrupted)


def agent_cell_count(shell: Any | None) -> int | None:
    """The In[n] of the ``%%agent`` cell running now: the marker the ran cell shows, so it
    reads "ran during In[n]". IPython counts the running cell before it runs (so the
    shell's count is already the next cell's)."""
    count = getattr(shell, "execution_count", None)
    return count - 1 if isinstance(count, int) and count > 1 else None


def _part(part: Any) -> TextPart | ImagePart:
    return part if isinstance(part, TextPart | ImagePart) else TextPart(text=str(part))


async def _answer(
    link: NotebookLink, op: str, args: dict[str, Any], render: Callable[[Any], Any]
) -> ToolResult:
    try:
        reply = await link.request(op, args)
    except NotebookToolError as error:
        return _error(str(error))
    rendered = render(reply)
    return rendered if isinstance(rendered, ToolResult) else ToolResult(content=str(rendered))


def _error(text: str) -> ToolResult:
    return ToolResult(content=text, is_error=True)


def _cells_text(reply: Any) -> str:
    cells = reply.get("cells") if isinstance(reply, dict) else None
    if not isinstance(cells, list):
        return "The notebook sent no cell list."
    lines = [f"{plural(len(cells), 'cell')} (index, id, type, In[n], source head, outputs):"]
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = str(cell.get("source", ""))
        head = source.strip().splitlines()[0] if source.strip() else "(empty)"
        head = head if len(head) <= HEAD else head[: HEAD - 1] + "…"
        count = cell.get("execution_count")
        ran = f" In[{count}]" if isinstance(count, int) else ""
        ran += " (running now: do not edit it)" if cell.get("running") else ""
        more = source.count("\n")
        extra = f" (+{plural(more, 'line')})" if more else ""
        outputs = cell.get("outputs")
        summary = ", ".join(str(o) for o in outputs) if isinstance(outputs, list) else ""
        lines.append(
            f"[{cell.get('index')}] {cell.get('id')} {cell.get('type')}{ran}: {head!r}{extra}"
            + (f" -> {summary}" if summary else "")
        )
    return for_model("\n".join(lines))


def _cell_result(reply: Any) -> ToolResult:
    if not isinstance(reply, dict):
        return _error("The notebook sent no cell.")
    listed = reply.get("outputs")
    listed = listed if isinstance(listed, list) else []
    outputs = [o for o in listed if isinstance(o, dict) and "output_type" in o]
    count = reply.get("execution_count")
    ran = f", In[{count}]" if isinstance(count, int) else ""
    head = f"Cell {reply.get('id')} (index {reply.get('index')}, {reply.get('type')}{ran}):"
    text = f"{head}\n{reply.get('source', '')}"
    if reply.get("type") == "code":
        shown = model_text(outputs) if outputs else "(no outputs)"
        text += f"\n--- outputs ---\n{shown}"
    text = for_model(text)
    images = _images(outputs)
    if not images:
        return ToolResult(content=text)
    parts: list[TextPart | ImagePart] = [TextPart(text=text)]
    parts += [ImagePart(image_url=ImageUrl(url=url)) for url in images[:MODEL_IMAGES]]
    return ToolResult(content=tuple(parts))


def _images(outputs: list[dict[str, Any]]) -> list[str]:
    found = []
    for output in outputs:
        data = output.get("data")
        for mime in ("image/png", "image/jpeg"):
            if isinstance(data, dict) and isinstance(data.get(mime), str):
                found.append(f"data:{mime};base64,{data[mime].strip()}")
                break
    return found


def _inserted(reply: Any) -> str:
    if not isinstance(reply, dict) or not isinstance(reply.get("cell_id"), str):
        return "The notebook inserted the cell but did not say its id (call list_cells)."
    return f"Inserted cell {reply['cell_id']} at index {reply.get('index')}."
