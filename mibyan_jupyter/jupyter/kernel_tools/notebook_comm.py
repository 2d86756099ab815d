"""The kernel's end of the notebook tools' comm: requests to the front-end extension, which
owns the notebook model, and its replies.

Why the front end opens it: the kernel does not know which notebook it serves (nbclient and
plain IPython say nothing, and one kernel may be shown by several panels). The extension
(labextension/src/notebook_tools.ts) opens a comm on :data:`TARGET` for each notebook panel
once its kernel is ready; the last one opened is the notebook the tools act on. Without it
(headless: nbclient, nbconvert, papermill) every tool says :data:`HEADLESS`.

A request is ``{"type": "request", "id", "op", "args"}``; the front end answers
``{"type": "reply", "id", "ok", "result" | "error"}``. The tool awaits an asyncio future per
request, resolved from the comm handler: ipykernel >= 7.4 dispatches comm messages while the
``%%agent`` cell awaits its run (docs/architecture.md, "Running inside the kernel"), and a
handler that runs on another thread resolves it through ``call_soon_threadsafe``. The front
end also sends ``{"type": "sync", "cells": [{"id", "source"}]}`` on open and after each edit,
so the approval card can show a diff of an edit without a round trip (the card is built
synchronously, see ``risk.py``). The kernel answers an open with ``{"type": "attached"}``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

log = logging.getLogger(__name__)

TARGET = "mibyan_jupyter.notebook"
TIMEOUT_S = 10.0
"""How long a request waits for the front end (a busy browser tab answers in milliseconds)."""
HEADLESS = (
    "notebook tools need JupyterLab with the mibyan-jupyter extension; "
    "headless runs cannot edit the notebook"
)
_MAX_MIRRORED = 200_000
"""Characters of one cell's source kept for the approval card's diff."""


class NotebookToolError(Exception):
    """A request the front end refused or never answered; the message is for the model."""


class NotebookLink:
    """The comm of the notebook the tools act on, its pending requests, and a mirror of
    its cells' sources (id -> source, from the front end's ``sync`` messages)."""

    def __init__(self) -> None:
        self.comm: Any | None = None
        self.notebook_path: str | None = None
        self.sources: dict[str, str] = {}
        self.timeout = TIMEOUT_S
        self._pending: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)

    @property
    def connected(self) -> bool:
        return self.comm is not None

    def attach(self, comm: Any, data: dict[str, Any]) -> None:
        """A panel opened the comm: it is now the notebook the tools act on."""
        self.comm = comm
        path = data.get("notebook_path")
        self.notebook_path = path if isinstance(path, str) else None
        self.sources = {}
        self._sync(data.get("cells"))
        comm.on_msg(lambda msg: self.receive(msg.get("content", {}).get("data", {})))
        comm.on_close(lambda _msg: self.detach(comm))
        comm.send({"type": "attached"})  # the front end knows the kernel side listens

    def detach(self, comm: Any) -> None:
        """The comm closed (panel closed, kernel restarted): fail what waits on it."""
        if comm is not self.comm:
            return
        self.comm = None
        self.sources = {}
        for request_id in list(self._pending):
            self._resolve(request_id, NotebookToolError("the notebook closed its connection"))

    def receive(self, data: Any) -> None:
        """A message from the front end (any thread); malformed ones are ignored."""
        if not isinstance(data, dict):
            return
        if data.get("type") == "sync":
            self.sources = {}
            self._sync(data.get("cells"))
        elif data.get("type") == "reply" and isinstance(data.get("id"), str):
            if data.get("ok") is True:
                self._resolve(data["id"], data.get("result"))
            else:
                error = data.get("error")
                text = error if isinstance(error, str) and error else "the notebook refused it"
                self._resolve(data["id"], NotebookToolError(text[:2000]))

    async def request(self, op: str, args: dict[str, Any]) -> Any:
        """Send one request and await its result; :class:`NotebookToolError` when there is
        no front end, it refuses, or it does not answer within :attr:`timeout` seconds."""
        comm, wait = self.comm, self.timeout
        if comm is None:
            raise NotebookToolError(HEADLESS)
        request_id = f"nb-{next(self._ids)}"
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[request_id] = (loop, future)
        try:
            comm.send({"type": "request", "id": request_id, "op": op, "args": args})
            result = await asyncio.wait_for(future, wait)
        except TimeoutError:
            raise NotebookToolError(
                f"the notebook did not answer within {wait:g} s (is its tab still open?)"
            ) from None
        finally:
            self._pending.pop(request_id, None)
        self._follow(op, args, result)
        return result

    def _follow(self, op: str, args: dict[str, Any], result: Any) -> None:
        """The mirror after an edit the front end confirmed, at once: its ``sync`` may come
        after the next approval card (a ``run_cell`` of the cell just inserted)."""
        cell_id = args.get("cell_id")
        if op == "insert" and isinstance(result, dict) and isinstance(result.get("cell_id"), str):
            self.sources[result["cell_id"]] = str(args.get("source", ""))[:_MAX_MIRRORED]
        elif op == "replace" and isinstance(cell_id, str):
            self.sources[cell_id] = str(args.get("source", ""))[:_MAX_MIRRORED]
        elif op == "delete" and isinstance(cell_id, str):
            self.sources.pop(cell_id, None)
        elif op == "read" and isinstance(result, dict) and isinstance(result.get("source"), str):
            self.sources[str(result.get("id"))] = result["source"][:_MAX_MIRRORED]

    def _resolve(self, request_id: str, value: Any) -> None:
        entry = self._pending.get(request_id)
        if entry is None:
            return  # late (timed out) or unknown
        loop, future = entry

        def settle() -> None:
            if future.done():
                return
            if isinstance(value, BaseException):
                future.set_exception(value)
            else:
                future.set_result(value)

        loop.call_soon_threadsafe(settle)

    def _sync(self, cells: Any) -> None:
        if not isinstance(cells, list):
            return
        for cell in cells:
            if isinstance(cell, dict):
                cell_id, source = cell.get("id"), cell.get("source")
                if isinstance(cell_id, str) and isinstance(source, str):
                    self.sources[cell_id] = source[:_MAX_MIRRORED]


LINK = NotebookLink()
"""The one link of this kernel (one kernel process, one served notebook at a time)."""


def register(kernel: Any, link: NotebookLink = LINK) -> bool:
    """Register :data:`TARGET` with the kernel's comm manager (``False`` without one)."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        try:
            from comm import get_comm_manager

            manager = get_comm_manager()
        except Exception:
            return False
    manager.register_target(TARGET, lambda comm, msg: _on_open(link, comm, msg))
    return True


def _on_open(link: NotebookLink, comm: Any, open_msg: dict[str, Any]) -> None:
    data = open_msg.get("content", {}).get("data", {}) or {}
    try:
        link.attach(comm, data if isinstance(data, dict) else {})
    except Exception:  # never break the front end
        log.exception("mibyan-jupyter: opening the notebook tools' comm failed")
