"""The view's protocol in both languages: the op types of view/ops.py and their mirror
static/ops.d.ts name the same kinds, and what a view really sends type-checks as the front
end's ``ViewOp`` and ``Batch`` under the tsc options the build uses (tsconfig.view.json),
while an op with a renamed field, an unknown kind or a wrong type fails that check."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from view_support import Recorder, click, record_comms, reply_events, update

from mibyan_jupyter.core.events import (
    AgentEnd,
    ApprovalRequested,
    ApprovalResolved,
    BudgetStatus,
    BudgetUpdated,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from mibyan_jupyter.core.messages import AssistantMessage, ToolMessage, UserMessage
from mibyan_jupyter.core.notices import FallbackNotice, RetryNotice
from mibyan_jupyter.core.results import MemoryResults, spill
from mibyan_jupyter.core.stream import ThinkingDelta, ToolCallDelta, ToolCallStart
from mibyan_jupyter.core.tools import ToolResult
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader
from mibyan_jupyter.jupyter.view.children import ChildCard
from mibyan_jupyter.jupyter.view.front_end import FRONT_END_TYPES
from mibyan_jupyter.jupyter.view.ops import OP_KINDS, AskChoice, AskText, ViewOp
from mibyan_jupyter.jupyter.view.widget import FRONT_END, STATIC

REPO = Path(__file__).resolve().parents[3]
TSC = REPO / "labextension" / "node_modules" / "typescript" / "bin" / "tsc"
VIEW_CONFIG = REPO / "labextension" / "tsconfig.view.json"
OPS_D_TS = STATIC / "ops.d.ts"


def d_ts_tags(field: str) -> set[str]:
    """The string literals ops.d.ts gives ``field`` in its interfaces (``op: "header";``),
    plus, for ``op``, the members of ``DeltaKind`` (the delta op's kind)."""
    text = OPS_D_TS.read_text()
    found = set(re.findall(rf'^\s+{field}: "(\w+)";$', text, re.MULTILINE))
    if field == "op":
        delta = re.search(r"^export type DeltaKind = ([^;]+);", text, re.MULTILINE)
        assert delta is not None
        found |= set(re.findall(r'"(\w+)"', delta[1]))
    return found


def test_python_and_typescript_name_the_same_kinds() -> None:
    assert len(OP_KINDS) == 25  # 17, "ask", "answered", "page", "tool_output", "blocks", "stats"
    # and "child_start", "child_status" (a delegated child's card)
    assert {"ask", "answered", "page"} <= OP_KINDS
    assert d_ts_tags("op") == set(OP_KINDS)
    assert d_ts_tags("type") == set(FRONT_END_TYPES)
    assert {"rendered", "decision", "decide_all", "stop", "answer", "expand"} == FRONT_END_TYPES


def every_kind(recorder: Recorder) -> None:
    """Drive one view through events that make it send every kind of op."""
    view = AgentView(
        ViewHeader("A title", "s-1", "demo", demo=True, context_window=1000),
        risk_note=lambda name, args: f"{name} writes a file",
    )
    view(MessageEnd(message=UserMessage(content="write it")))
    view(MessageStart(message=AssistantMessage()))
    view(update(ThinkingDelta(delta="hmm ")))
    view(update(ToolCallStart(index=0, id="c0", name="search")))
    view(RetryNotice(attempt=2, max_attempts=3, delay=1, error_kind="rate_limit", message="429"))
    for event in reply_events(["Writing ", "it now. "]):
        view(event)
    view(update(ToolCallStart(index=0, id="c1", name="write_file")))
    view(update(ToolCallDelta(index=0, delta='{"path": "a.txt"} ')))
    view(ToolExecutionStart(call_id="c1", name="write_file", args={"path": "a.txt"}))
    view(ApprovalRequested(call_id="c1", name="write_file", args={"path": "a.txt"}))
    view(ApprovalResolved(call_id="c1", name="write_file", approved=True))
    printed = ToolResult(content="writing a.txt\n", details={"stream": "stdout"})
    view(ToolExecutionUpdate(call_id="c1", name="write_file", partial=printed))  # tool_output
    result = ToolMessage(tool_call_id="c1", name="write_file", content="wrote 2 bytes")
    view(ToolExecutionEnd(call_id="c1", name="write_file", result=result, is_error=False))
    store = MemoryResults()
    view.read_results_from(store)
    big = ToolMessage(tool_call_id="c2", name="read_file", content="line\n" * 5_000)
    kept = spill(big, store, 16_000)  # a spilled result: a card that can load it whole
    view(ToolExecutionEnd(call_id="c2", name="read_file", result=kept, is_error=False))
    click(view, {"type": "expand", "call_id": "c2", "offset": 0})
    view(FallbackNotice(from_model="big", to_model="small", reason="404"))
    for event in reply_events(["answered ", "by the fallback "]):
        view(event)  # the header says which model answered
    view(BudgetUpdated(budgets=(BudgetStatus(name="turns", used=1, limit=None),)))
    view.show_queued("and read it back", "follow_up")
    view.show_notice("a note", level="warning")
    choices = [AskChoice(value="fork", label="Fork", detail="a new session")]
    view.show_ask("ask1", "Fork it?", choices, "fork")
    view.show_answered("ask1", "fork", "Fork", "default")
    view.show_ask("ask2", "Which?", choices, "fork", text=AskText(placeholder="Type", limit=9))
    view.show_answered("ask2", "", "typed", "stopped")  # a text box; a stopped wait
    child = view.child(ChildCard("child-1", "c1", "count them", ("list_variables",), 50))
    child(MessageEnd(message=UserMessage(content="count them")))  # made in the child's card
    child(BudgetUpdated(budgets=(BudgetStatus(name="turns", used=1, limit=50),)))
    child(AgentEnd(messages=(), reason="completed"))
    view(AgentEnd(messages=(), reason="completed"))
    view.finish([], status="completed")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = record_comms(monkeypatch)
    every_kind(recorder)
    return recorder


def test_a_view_sends_every_kind_as_its_python_type(sent: Recorder) -> None:
    ops = sent.ops()
    assert {op["op"] for op in ops} == set(OP_KINDS)
    adapter: TypeAdapter[ViewOp] = TypeAdapter(ViewOp)
    for op in ops:
        assert adapter.validate_python(op, strict=True) == op


def typescript(name: str, values: list[Any]) -> str:
    return f"export const {name} = {json.dumps(values, ensure_ascii=False, indent=1)};\n"


def sample(ops: list[Any], batches: list[Any] | None = None) -> str:
    names = "ViewOp" if batches is None else "Batch, ViewOp"
    lines = [f'import type {{ {names} }} from "./ops";\n', typescript("ops: ViewOp[]", ops)]
    if batches is not None:
        lines.append(typescript("batches: Batch[]", batches))
    return "".join(lines)


def require_tsc() -> None:
    """Skip without tsc, except under ``make test`` (MIBYAN_NO_SKIP=1), which builds the
    extension first: there a missing tsc is a failure, not a skipped check."""
    if TSC.is_file() and shutil.which("node") is not None:
        return
    message = "tsc is not installed: build labextension first (labextension/build.sh)"
    if os.environ.get("MIBYAN_NO_SKIP") == "1":
        pytest.fail(message)
    pytest.skip(message)


def run_tsc(folder: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """tsc with the options of labextension/tsconfig.view.json on ops.d.ts and ``files``."""
    require_tsc()
    shutil.copy(OPS_D_TS, folder / "ops.d.ts")
    for name, text in files.items():
        (folder / name).write_text(text)
    config = {"extends": str(VIEW_CONFIG), "files": ["ops.d.ts", *files]}
    (folder / "tsconfig.json").write_text(json.dumps(config))
    return subprocess.run(
        ["node", str(TSC), "-p", str(folder / "tsconfig.json"), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rename(op: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if key == old else key): value for key, value in op.items()}


def test_what_python_sends_type_checks_and_wrong_ops_do_not(sent: Recorder, tmp_path: Path) -> None:
    ops = sent.ops()
    first = {kind: next(op for op in ops if op["op"] == kind) for kind in OP_KINDS}
    wrong = {
        "renamed_field.ts": [rename(first["header"], "title", "titel")],
        "unknown_kind.ts": [{**first["notice"], "op": "banner"}],
        "missing_field.ts": [{k: v for k, v in first["result"].items() if k != "images"}],
        "wrong_type.ts": [{**first["bar"], "fraction": "half"}],
        "unknown_status.ts": [{**first["run"], "status": "paused"}],
        "extra_field.ts": [{**first["final"], "markdown": "**x**"}],
        "delta_kind.ts": [{**first["text"], "op": "html"}],
    }
    files = {"good.ts": sample(ops, sent.batches())}
    files.update({name: sample(bad) for name, bad in wrong.items()})
    done = run_tsc(tmp_path, files)
    errors = [line for line in done.stdout.splitlines() if ": error TS" in line]
    failing = {Path(line.split("(", 1)[0]).name for line in errors}
    assert failing == set(wrong), done.stdout + done.stderr
    assert done.returncode != 0


def test_the_view_check_of_the_build_passes(tmp_path: Path) -> None:
    """What build.sh runs (tsc -p tsconfig.view.json on view.js and ops.d.ts) passes; a
    copy of view.js that reads a field the ops do not have fails it."""
    require_tsc()
    done = subprocess.run(
        ["node", str(TSC), "-p", str(VIEW_CONFIG), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    view_js = (STATIC / "view.js").read_text()
    broken = view_js.replace("op.title ||", "op.titel ||", 1)
    assert broken != view_js
    others = {name: (STATIC / name).read_text() for name in ("view-types.d.ts", *FRONT_END[:-1])}
    done = run_tsc(tmp_path, {**others, "view.js": broken})
    assert done.returncode != 0
    assert "Property 'titel' does not exist on type 'HeaderOp'" in done.stdout
    assert done.stdout.count("error TS") == 1, done.stdout  # that one, and nothing else
