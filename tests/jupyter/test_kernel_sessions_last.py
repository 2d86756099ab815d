"""Sessions that last, in a real ipykernel against the loopback fake provider.

The kernel is a process of its own, so the fake server runs in the test process on
127.0.0.1 and the cells name it as their model (README, "Try it without a key"). What is
checked is what the user meets (docs/architecture.md, "Context compression"):

* a cell whose conversation outgrew its context window compacts before its request: its
  view shows the receipt (messages summarised, tokens before -> after, the summary under
  it), the next cell continues in the child session (``%agent status`` names it) and
  ``%agent export`` still holds the messages the summary replaced;
* pins survive a kernel restart: ``%agent pin``, restart, ``%agent resume last``,
  ``%agent pins`` lists it and the next request's system prompt carries it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from kernel_driver import Execution, KernelDriver

from mibyan_jupyter.testing import FakeProviderServer, FakeReply

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

RECEIPT = re.compile(r"\d+ messages summarised, \d+ → \d+ messages, [\d,]+ → [\d,]+ tokens")
"""The receipt: messages summarised, messages and tokens before -> after."""
SUMMARY = "The user asked a dozen numbered questions about lighthouses."


def ok(execution: Execution) -> str:
    """The cell's text, after checking it ended without an error."""
    assert (execution.reply or {}).get("status") == "ok", (execution.reply, execution.text())
    return execution.text()


def notice_ops(kernel: KernelDriver, kind: str) -> list[dict[str, Any]]:
    """Every notice op of ``kind`` the kernel sent to a view (what the front end shows)."""
    found = []
    for message in kernel.comm_messages:
        batch = message.get("data", {}).get("content")
        if isinstance(batch, list):
            found += [
                item
                for item in batch[1:]
                if isinstance(item, dict)
                and item.get("op") == "notice"
                and item.get("kind") == kind
            ]
    return found


def sessions(kernel: KernelDriver) -> list[tuple[Any, ...]]:
    return kernel.query("SELECT id, parent_id, link_kind FROM sessions ORDER BY created_at")


def test_a_cell_past_its_window_compacts_and_the_next_continues_the_child(
    kernel: KernelDriver, server: FakeProviderServer, tmp_path: Path
) -> None:
    model = f"fake:demo@{server.base_url}"
    server.push(*(FakeReply(f"answer {n}") for n in range(12)))
    ok(kernel.run(f"%%agent --model {model} --tools none\nquestion zero about lighthouses"))
    for n in range(1, 12):
        ok(kernel.run(f"%%agent --tools none\nquestion {n} " + "about lighthouses " * 20))
    ((parent, _, _),) = sessions(kernel)
    server.push(FakeReply(SUMMARY), FakeReply("after the summary"))
    ok(kernel.run("%%agent --tools none --context-window 1500\nand the thirteenth?", timeout=60))
    assert server.pending == 0, "the summary and the answer were both asked for"

    (receipt,) = notice_ops(kernel, "compaction")
    assert RECEIPT.search(receipt["text"]), receipt
    assert receipt.get("detail") == SUMMARY  # shown collapsed under the receipt

    rows = sessions(kernel)
    assert len(rows) == 2, rows
    child = rows[1]
    assert child[1:] == (parent, "compression")
    status = ok(kernel.run("%agent status"))
    assert child[0] in status, status
    server.push(FakeReply("still here"))
    ok(kernel.run("%%agent --tools none\none more"))
    assert len(sessions(kernel)) == 2, "the next cell continued the child, not a new session"
    assert "one more" in str(server.requests[-1].body)
    assert "question 1 about" not in str(server.requests[-1].body)  # summarised away for the model

    exported = tmp_path / "whole.md"
    said = ok(kernel.run(f"%agent export {child[0]} {exported}"))
    assert "Wrote" in said, said
    history = exported.read_text(encoding="utf-8")
    for prompt in ("question zero", "question 1 about", "and the thirteenth?", "one more"):
        assert prompt in history, f"{prompt!r} missing from the export"


def test_pins_survive_a_kernel_restart(kernel: KernelDriver, server: FakeProviderServer) -> None:
    model = f"fake:demo@{server.base_url}"
    server.push(FakeReply("hello"), FakeReply("bonjour"))
    ok(kernel.run(f"%%agent --model {model} --tools none\nhello"))
    ok(kernel.run("%agent pin Answer in French"))
    kernel.manager.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    ok(kernel.run("%load_ext mibyan_jupyter"))
    ok(kernel.run("%agent resume last"))
    pins = ok(kernel.run("%agent pins"))
    assert "Answer in French" in pins, pins
    ok(kernel.run("%%agent --tools none\nand now?"))
    body = server.requests[-1].body
    assert body is not None
    (system,) = [m for m in body["messages"] if m["role"] == "system"]
    assert "Answer in French" in str(system["content"])
