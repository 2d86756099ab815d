"""The notebook tools in a real ipykernel, the model scripted over loopback HTTP:

* headless (no front end opened the comm): ``list_cells`` answers the one clear message,
  ``insert_cell`` is decided by the headless policy (denied), so nothing waits, and with
  ``--approve auto`` it answers the same message;
* with a front end (played here on the client's side of the comm, opened as the extension
  opens it): the request reaches it while the ``%%agent`` cell awaits its run, its reply
  reaches the tool, and the request carries the session and call id as the cell's metadata.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kernel_driver import KernelDriver

from mibyan_jupyter.jupyter.kernel_tools.notebook_comm import HEADLESS, TARGET
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]


def tool_results(server: FakeProviderServer) -> dict[str, str]:
    body = server.requests[-1].body
    assert isinstance(body, dict)
    return {m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"}


def agent(server: FakeProviderServer, more: str = "") -> str:
    return f"%%agent --model fake:demo@{server.base_url} --tools notebook {more}\nEdit it."


def test_headless_the_tools_refuse_with_one_clear_message(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    calls = [FakeCall("list_cells", {}, id="l1"), FakeCall("insert_cell", {"source": "1"}, id="i1")]
    server.push(FakeReply("Looking.", calls=calls), FakeReply("Done."))
    execution = kernel.run(agent(server), timeout=60)
    assert execution.reply is not None
    assert execution.reply["status"] == "ok"
    results = tool_results(server)
    assert results["l1"] == HEADLESS
    assert results["i1"].startswith("The call to insert_cell was denied")
    server.push(
        FakeReply("Again.", calls=[FakeCall("insert_cell", {"source": "1"}, id="i2")]),
        FakeReply("Done."),
    )
    execution = kernel.run(agent(server, "--approve auto"), timeout=60)
    assert tool_results(server)["i2"] == HEADLESS  # approved, and still nothing to edit


def reply(kernel: KernelDriver, comm_id: str, data: dict[str, Any]) -> None:
    message = kernel.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    kernel.client.shell_channel.send(message)


def test_a_front_end_gets_the_request_while_the_cell_awaits(
    kernel: KernelDriver, server: FakeProviderServer
) -> None:
    comm_id = kernel.open_comm(TARGET, {"notebook_path": "nb.ipynb", "cells": []})
    server.push(
        FakeReply("Inserting.", calls=[FakeCall("insert_cell", {"source": "x = 1"}, id="i1")]),
        FakeReply("Done."),
    )
    execution = kernel.execute(agent(server, "--approve auto"))
    kernel.wait(lambda: len(kernel.comm_replies(comm_id)) > 1, 30, "the insert request")
    attached, request = kernel.comm_replies(comm_id)
    assert attached == {"type": "attached"}
    assert request["type"] == "request"
    assert request["op"] == "insert"
    assert request["args"]["source"] == "x = 1"
    assert request["args"]["metadata"]["message"] == "i1"
    session = request["args"]["metadata"]["session"]
    assert isinstance(session, str)
    assert session
    result = {"cell_id": "new-cell", "index": 0}
    reply(kernel, comm_id, {"type": "reply", "id": request["id"], "ok": True, "result": result})
    kernel.finish(execution, 30, "the agent cell")
    assert tool_results(server)["i1"] == "Inserted cell new-cell at index 0."
    stored = kernel.query("SELECT id FROM sessions")
    assert (session,) in stored, json.dumps(stored)
