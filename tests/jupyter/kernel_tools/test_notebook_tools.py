"""The notebook tools' kernel side, with a fake front end at the comm: requests and replies,
what the model reads, the metadata of cells the agent touched, the approval card's diff,
and the one clear error without a front end (headless) or when it does not answer."""

from __future__ import annotations

import asyncio
import base64
import threading
from pathlib import Path
from typing import Any

import pytest

from mibyan_jupyter.core import AbortSignal, ImagePart, Tool, ToolResult
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools, risk_note
from mibyan_jupyter.jupyter.kernel_tools.notebook import notebook_tools
from mibyan_jupyter.jupyter.kernel_tools.notebook_comm import (
    HEADLESS,
    TARGET,
    NotebookLink,
    register,
)
from mibyan_jupyter.jupyter.kernel_tools.notebook_risk import notebook_risk

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


class FakeFrontEnd:
    """The comm as the extension drives it: answers each request from its own cell list,
    from another thread (as a subshell would), or never (``silent``)."""

    def __init__(self, link: NotebookLink, cells: list[dict[str, Any]]) -> None:
        self.link, self.cells, self.sent = link, cells, list[dict[str, Any]]()
        self.silent = False
        self.handlers: dict[str, Any] = {}
        link.attach(self, {"notebook_path": "nb.ipynb", "cells": self.sync_cells()})

    def sync_cells(self) -> list[dict[str, str]]:
        return [{"id": c["id"], "source": c["source"]} for c in self.cells]

    def on_msg(self, handler: Any) -> None:
        self.handlers["msg"] = handler

    def on_close(self, handler: Any) -> None:
        self.handlers["close"] = handler

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)
        if data["type"] == "request" and not self.silent:
            reply = self.answer(data["op"], data["args"])
            message = {"content": {"data": {"type": "reply", "id": data["id"], **reply}}}
            threading.Thread(target=self.handlers["msg"], args=(message,)).start()

    def answer(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        index = next((i for i, c in enumerate(self.cells) if c["id"] == args.get("cell_id")), -1)
        if op == "list":
            return {"ok": True, "result": {"cells": [self.head(i) for i in range(len(self.cells))]}}
        if op == "insert":
            self.cells.append({"id": "new1", "type": args["cell_type"], "source": args["source"]})
            return {"ok": True, "result": {"cell_id": "new1", "index": len(self.cells) - 1}}
        if index < 0:
            return {"ok": False, "error": f"this notebook has no cell with id {args['cell_id']!r}"}
        if op == "read":
            return {"ok": True, "result": {**self.cells[index], "index": index}}
        return {"ok": True, "result": {}}  # replace, delete, outputs: recorded in self.sent

    def head(self, index: int) -> dict[str, Any]:
        cell = self.cells[index]
        return {**cell, "index": index, "execution_count": 3, "outputs": ["stream stdout"]}


def tools(link: NotebookLink, namespace: dict[str, Any] | None = None) -> dict[str, Tool]:
    built = notebook_tools(
        namespace={} if namespace is None else namespace,
        shell=None,
        on_interrupt=None,
        link=link,
        session=lambda: "sess-1",
    )
    return {t.name: t for t in built}


def call(tool: Tool, **args: Any) -> ToolResult:
    async def go() -> Any:
        return await tool.execute("call-7", tool.validate(args), AbortSignal(), lambda _: None)

    result = asyncio.run(go())
    assert isinstance(result, ToolResult)
    return result


CELLS = [
    {"id": "c-imp", "type": "code", "source": "import math\nx = 2", "outputs": []},
    {
        "id": "c-plot",
        "type": "code",
        "source": "plot()",
        "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "drawn\n"},
            {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Fig>"}},
        ],
    },
    {"id": "c-md", "type": "markdown", "source": "# Title", "outputs": []},
]


@pytest.fixture
def front() -> FakeFrontEnd:
    return FakeFrontEnd(NotebookLink(), [dict(c) for c in CELLS])


def test_headless_every_tool_says_why_it_is_unavailable() -> None:
    link = NotebookLink()
    args = {
        "list_cells": {},
        "read_cell": {"cell_id": "a"},
        "insert_cell": {"source": "1"},
        "replace_cell_source": {"cell_id": "a", "source": "2"},
        "delete_cell": {"cell_id": "a"},
        "run_cell": {"cell_id": "a"},
    }
    for name, tool in tools(link).items():
        result = call(tool, **args[name])
        assert (result.is_error, result.content) == (True, HEADLESS), name
    assert "JupyterLab with the mibyan-jupyter extension" in HEADLESS


def test_list_and_read_address_cells_by_id(front: FakeFrontEnd) -> None:
    listed = call(tools(front.link)["list_cells"])
    text = content_text(listed.content)
    assert "3 cells" in text
    assert "[0] c-imp code In[3]: 'import math' (+1 line) -> stream stdout" in text
    read = call(tools(front.link)["read_cell"], cell_id="c-plot")
    assert isinstance(read.content, tuple)
    assert "plot()" in content_text(read.content)
    assert "drawn" in content_text(read.content)
    images = [p for p in read.content if isinstance(p, ImagePart)]
    assert [i.image_url.url for i in images] == [f"data:image/png;base64,{PNG}"]
    missing = call(tools(front.link)["read_cell"], cell_id="nope")
    assert missing.is_error
    assert "no cell with id 'nope'" in str(missing.content)


def test_insert_carries_the_session_and_call_and_reads_need_no_approval(
    front: FakeFrontEnd,
) -> None:
    by_name = tools(front.link)
    result = call(by_name["insert_cell"], source="y = 3", cell_type="code", below="c-imp")
    assert result.content == "Inserted cell new1 at index 3."
    request = front.sent[-1]
    assert request["op"] == "insert"
    assert request["args"]["metadata"] == {"session": "sess-1", "message": "call-7"}
    assert request["args"]["below"] == "c-imp"
    assert front.link.sources["new1"] == "y = 3", "the run_cell card right after shows it"
    assert not by_name["list_cells"].side_effects
    assert not by_name["read_cell"].side_effects
    assert all(by_name[n].side_effects for n in ("insert_cell", "run_cell", "delete_cell"))
    bad = call(by_name["insert_cell"], source="x", cell_type="raw")
    assert bad.is_error
    assert "'code' or 'markdown'" in str(bad.content)


def test_the_edit_card_shows_a_unified_diff_and_the_edit_expects_that_text(
    front: FakeFrontEnd,
) -> None:
    args = {"cell_id": "c-imp", "source": "import math\nx = 3"}
    card = risk_note("replace_cell_source", args)  # the module's own link: not connected
    assert card is not None
    assert "unknown" in card
    card = notebook_risk("replace_cell_source", args, front.link)
    assert card is not None
    assert "--- c-imp (now)\n+++ c-imp (proposed)" in card
    assert "-x = 2\n+x = 3" in card
    call(tools(front.link)["replace_cell_source"], **args)
    assert front.sent[-1]["args"]["expected"] == "import math\nx = 2"
    run_card = notebook_risk("run_cell", {"cell_id": "c-imp"}, front.link)
    assert run_card is not None
    assert "import math" in run_card
    assert (
        notebook_risk("delete_cell", {"cell_id": "c-md"}, front.link)
        == "Deletes cell c-md (1 lines: '# Title')"
    )


def test_sync_replaces_the_mirror(front: FakeFrontEnd) -> None:
    front.handlers["msg"](
        {"content": {"data": {"type": "sync", "cells": [{"id": "z", "source": "s"}]}}}
    )
    assert front.link.sources == {"z": "s"}
    front.handlers["msg"]({"content": {"data": ["not", "a", "dict"]}})  # ignored
    assert front.link.sources == {"z": "s"}


def test_run_cell_runs_its_code_here_and_sends_the_outputs(front: FakeFrontEnd) -> None:
    front.cells[0]["source"] = "print('hi from the cell')\nz = 40 + 2\nz"
    namespace: dict[str, Any] = {}
    result = call(tools(front.link, namespace)["run_cell"], cell_id="c-imp")
    assert not result.is_error
    assert "hi from the cell" in content_text(result.content)
    assert "Out: 42" in str(result.content)
    assert namespace["z"] == 42
    shown = front.sent[-1]
    assert shown["op"] == "outputs"
    assert shown["args"]["cell_id"] == "c-imp"
    kinds = [o["output_type"] for o in shown["args"]["outputs"]]
    assert kinds == ["stream", "execute_result"]
    assert shown["args"]["metadata"] == {"session": "sess-1", "message": "call-7"}
    front.cells[0]["running"] = True  # the %%agent cell itself: never run it again
    again = call(tools(front.link)["run_cell"], cell_id="c-imp")
    assert again.is_error
    assert "running now" in str(again.content)
    markdown = call(tools(front.link)["run_cell"], cell_id="c-md")
    assert markdown.is_error
    assert "only code cells run" in str(markdown.content)


def test_no_answer_is_one_clear_error_and_a_closed_comm_fails_the_wait(
    front: FakeFrontEnd,
) -> None:
    front.silent = True
    front.link.timeout = 0.2
    result = call(tools(front.link)["list_cells"])
    assert result.is_error
    assert "did not answer within 0.2 s" in str(result.content)
    front.handlers["close"]({})
    assert not front.link.connected
    assert call(tools(front.link)["list_cells"]).content == HEADLESS


def test_the_target_is_registered_and_opening_attaches(tmp_path: Path) -> None:
    class Manager:
        def __init__(self) -> None:
            self.targets: dict[str, Any] = {}

        def register_target(self, name: str, handler: Any) -> None:
            self.targets[name] = handler

    class Kernel:
        comm_manager = Manager()

    link = NotebookLink()
    assert register(Kernel(), link)
    front = FakeFrontEnd.__new__(FakeFrontEnd)
    front.handlers, front.sent, front.silent, front.cells = {}, [], False, list(CELLS)
    front.link = link
    Kernel.comm_manager.targets[TARGET](front, {"content": {"data": {"cells": front.sync_cells()}}})
    assert link.connected
    assert link.sources["c-md"] == "# Title"
    assert front.sent == [{"type": "attached"}]
    group = kernel_tools(["notebook"], namespace={}, root=tmp_path)
    assert [t.name for t in group][:2] == ["list_cells", "read_cell"]


def test_the_export_marks_the_agents_code_cells_with_the_session() -> None:
    from mibyan_jupyter.core.messages import AssistantMessage, FunctionCall, ToolCall, ToolMessage
    from mibyan_jupyter.export import SessionMeta, export_notebook

    code = ToolCall(id="c1", function=FunctionCall(name="run_python", arguments='{"code": "1"}'))
    outputs = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    messages = [
        AssistantMessage(tool_calls=(code,), stop_reason="tool_use"),
        ToolMessage(
            tool_call_id="c1", name="run_python", content="1", details={"outputs": outputs}
        ),
    ]
    notebook = export_notebook(messages, session=SessionMeta(id="sess-9"))
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert cell.metadata == {"mibyan": {"session": "sess-9"}}
