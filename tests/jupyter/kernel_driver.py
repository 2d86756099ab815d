"""A real ipykernel driven over its protocol, as JupyterLab would: execute cells, watch
iopub, answer the view as its front-end code does (custom comm messages), open the queue
comm, interrupt. Used by the real-kernel tests; the session database is read directly."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.manager import KernelManager, start_new_kernel

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "JPY_SESSION_NAME")


@dataclass
class Execution:
    msg_id: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] | None = None
    """The shell channel's execute_reply for this request (arrives on its own channel)."""
    idle: bool = False
    """The kernel went idle on iopub after this request."""

    @property
    def done(self) -> bool:
        """Both the shell reply and the iopub idle of this request have arrived. Waiting
        for one of them is not enough: the two channels are read separately, so on a cold
        start the idle status may be seen before the reply (or the reply before the last
        outputs), and an assertion on the reply or the outputs then sees nothing yet."""
        return self.idle and self.reply is not None

    def text(self) -> str:
        """Every text of every output (HTML included), joined."""
        parts: list[str] = []
        for output in self.outputs:
            content = output["content"]
            if "text" in content:
                parts.append(content["text"])
            for value in content.get("data", {}).values():
                if isinstance(value, str):
                    parts.append(value)
            parts += content.get("traceback", [])
        return "\n".join(parts)


class KernelDriver:
    def __init__(self, workdir: Path, *, env: dict[str, str] | None = None) -> None:
        environment = {k: v for k, v in os.environ.items() if k not in KEYS}
        environment["MIBYAN_DB"] = str(workdir / "sessions.sqlite3")
        environment.update(env or {})
        self.db_path = workdir / "sessions.sqlite3"
        self.manager: KernelManager
        self.manager, self.client = start_new_kernel(
            kernel_name="python3", cwd=str(workdir), env=environment
        )
        self.executions: dict[str, Execution] = {}
        self.comms: dict[str, dict[str, Any]] = {}
        """comm_id -> the comm_open content, for every comm the kernel opened."""
        self.comm_messages: list[dict[str, Any]] = []

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    # -- executing ------------------------------------------------------------------------

    def execute(self, code: str, *, cell_id: str | None = None) -> Execution:
        """Send an execute_request (not waiting for it)."""
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        metadata = {"cellId": cell_id} if cell_id else {}
        message = self.client.session.msg("execute_request", content, metadata=metadata)
        self.client.shell_channel.send(message)
        execution = Execution(message["header"]["msg_id"])
        self.executions[execution.msg_id] = execution
        return execution

    def run(self, code: str, timeout: float = 30, **kwargs: Any) -> Execution:
        """Execute ``code`` and wait until it is :attr:`~Execution.done`."""
        execution = self.execute(code, **kwargs)
        self.finish(execution, timeout, f"cell did not finish: {code[:60]!r}")
        return execution

    def finish(self, execution: Execution, timeout: float, what: str) -> None:
        """Wait for the execute_reply of ``execution`` and the iopub idle of the same parent."""
        self.wait(lambda: execution.done, timeout, what)

    def pump(self, timeout: float = 0.05) -> None:
        """Read what the kernel sent (iopub and shell replies) for up to ``timeout``."""
        try:
            message = self.client.get_iopub_msg(timeout=timeout)
        except Empty:
            message = None
        while message is not None:
            self._take(message)
            try:
                message = self.client.get_iopub_msg(timeout=0.001)
            except Empty:
                message = None
        while True:
            try:
                reply = self.client.get_shell_msg(timeout=0.001)
            except Empty:
                break
            execution = self.executions.get(reply["parent_header"].get("msg_id", ""))
            if execution is not None:
                execution.reply = reply["content"]

    def _take(self, message: dict[str, Any]) -> None:
        kind = message["msg_type"]
        if kind == "comm_open":
            self.comms[message["content"]["comm_id"]] = message["content"]
        elif kind == "comm_msg":
            self.comm_messages.append(message["content"])
        execution = self.executions.get(message["parent_header"].get("msg_id", ""))
        if execution is None:
            return
        if kind == "status" and message["content"]["execution_state"] == "idle":
            execution.idle = True
        elif kind in ("stream", "display_data", "update_display_data", "execute_result", "error"):
            execution.outputs.append(message)

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s: {what}")
            self.pump()

    # -- the view's front end -------------------------------------------------------------

    def view_comms(self) -> list[str]:
        """Comm ids of the anywidget models the kernel opened (the cells' views)."""
        return [
            comm_id
            for comm_id, content in self.comms.items()
            if content.get("data", {}).get("state", {}).get("_model_name") == "AnyModel"
        ]

    def send_custom(self, comm_id: str, content: dict[str, Any]) -> None:
        """What the view's JS does with ``model.send(content)``."""
        data = {"method": "custom", "content": content}
        message = self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.client.shell_channel.send(message)

    def open_comm(self, target: str, data: dict[str, Any]) -> str:
        comm_id = uuid.uuid4().hex
        content = {"comm_id": comm_id, "target_name": target, "data": data}
        self.client.shell_channel.send(self.client.session.msg("comm_open", content))
        return comm_id

    def comm_replies(self, comm_id: str) -> list[dict[str, Any]]:
        return [m["data"] for m in self.comm_messages if m.get("comm_id") == comm_id]

    # -- the store ------------------------------------------------------------------------

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if not self.db_path.exists():
            return []
        with sqlite3.connect(self.db_path, timeout=5) as connection:
            try:
                return connection.execute(sql, params).fetchall()
            except sqlite3.OperationalError:
                return []  # the schema is not there yet

    def awaiting_approval(self) -> list[str]:
        return [
            row[0]
            for row in self.query(
                "SELECT call_id FROM tool_calls WHERE status = 'awaiting_approval'"
            )
        ]
