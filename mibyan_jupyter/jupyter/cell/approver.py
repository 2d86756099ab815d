"""Who answers an approval inside the kernel: the buttons of the cell's view, or, when no
front end is there to click them, the policy.

The questions of one batch are all open at once (docs/architecture.md, "One `%%agent`
cell, end to end"), each with its own future here, answered in any order by a click on
its card or by "Approve all". Clicks arrive while the cell awaits its run (ipykernel
>= 7.4), possibly on another thread, so they only ever resolve a future through
``call_soon_threadsafe``; the wait is cut in short slices so Kernel > Interrupt is honoured
at once. Headless runs (nbclient, nbconvert, papermill) have no front end: the view's
front-end code says "rendered" when it is shown; if it has not within ``headless_wait``
seconds, the policy decides (deny, with the reason recorded) and the run completes
(docs/architecture.md, "Running inside the kernel"). A kernel that cannot deliver clicks
during a run at all (ipykernel < 7.4, Colab's runtime: the kernel state's ``kernel_limits``)
is headless from the start: the policy decides at once, and the cell says once, in its
output, what is unavailable there.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import TYPE_CHECKING

from mibyan_jupyter.core.approval import (
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    AutoApprove,
    Decision,
    Denied,
    PolicyOnly,
)
from mibyan_jupyter.core.signal import AbortSignal
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.policy.approvals import FloorApprover, FlooredPolicy, admin_floor

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.view import AgentView

SLICE_S = 0.2
"""How long one wait for a click lasts before looking again (interrupt latency)."""


def headless_denial(request: ApprovalRequest, kernel: str | None = None) -> Denied:
    """The policy's denial when nobody can click; ``kernel``: the kernel that cannot
    deliver clicks during a run (``None``: there is no front end)."""
    why = (
        f"this kernel ({kernel}) cannot deliver clicks while a cell runs"
        if kernel is not None
        else "the notebook runs without a front end (nbclient, nbconvert, papermill)"
    )
    return Denied(
        f"{request.tool_name} needs approval ({request.reason}) and no one can click "
        f"Approve: {why}. Use --approve auto on the cell, or MIBYAN_APPROVE=auto, to "
        "allow it there.",
        decided_by="policy",
    )


def kernel_notice(kernel: str) -> str:
    """The one line a cell prints on a kernel that cannot deliver clicks during a run."""
    return (
        f"mibyan: this kernel ({kernel}) cannot deliver clicks while a cell runs, so here "
        "approvals are decided by the policy (no Approve/Deny clicks), the Stop button does "
        "not work (use Kernel > Interrupt), and a %%agent cell run meanwhile waits its turn "
        "instead of reaching the agent. Streaming works. ipykernel >= 7.4 has all of them."
    )


class CellApprover:
    """An :class:`~mibyan_jupyter.core.approval.Approver` backed by a cell's view."""

    def __init__(
        self,
        view: AgentView,
        loop: asyncio.AbstractEventLoop,
        *,
        headless_wait: float = 2.0,
    ) -> None:
        self._view = view
        self._loop = loop
        self._headless_wait = headless_wait
        self._shown_at = time.monotonic()
        self._rendered = asyncio.Event()
        self._pending: dict[str, asyncio.Future[Decision]] = {}
        self.headless = False
        """Set once the front end failed to answer the handshake: the policy decides."""
        view.on_rendered(self._rendered_elsewhere)
        view.on_decision(self._decided_elsewhere)
        if view.rendered:
            self._rendered.set()

    def _rendered_elsewhere(self) -> None:
        """The view's callback: any thread."""
        self._loop.call_soon_threadsafe(self._rendered.set)

    def _decided_elsewhere(self, call_id: str, decision: Decision) -> None:
        """The view's callback: any thread."""
        self._loop.call_soon_threadsafe(self._resolve, call_id, decision)

    def _resolve(self, call_id: str, decision: Decision) -> None:
        future = self._pending.get(call_id)
        if future is not None and not future.done():
            future.set_result(decision)

    async def _front_end_present(self) -> bool:
        if self._rendered.is_set():
            return True
        if self.headless:
            return False
        remaining = self._headless_wait - (time.monotonic() - self._shown_at)
        if remaining > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rendered.wait(), remaining)
        if self._rendered.is_set():
            return True
        if not self.headless:  # once, though a batch's questions all waited here together
            self.headless = True
            self._view.show_notice(
                "No front end answered (headless run): approvals are decided by the policy.",
                level="warning",
            )
        return False

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        if not await self._front_end_present():
            return headless_denial(request)
        future: asyncio.Future[Decision] = self._loop.create_future()
        self._pending[request.call_id] = future
        try:
            while not future.done():
                if signal.aborted:
                    return Denied("the run was stopped before a decision", decided_by="policy")
                await asyncio.wait({future}, timeout=SLICE_S)
            return future.result()
        finally:
            self._pending.pop(request.call_id, None)


class HeadlessPolicy:
    """Nobody can click (the real cell magic, blocking; a kernel that cannot deliver
    clicks during a run, named by ``kernel``): every "ask" is denied at once, with the
    reason saying why and how to allow it."""

    def __init__(self, kernel: str | None = None) -> None:
        self.kernel = kernel

    async def __call__(self, request: ApprovalRequest, signal: AbortSignal) -> Decision:
        return headless_denial(request, self.kernel)


def approval_gate(
    plan: CellPlan, policy: ApprovalPolicy, view: AgentView, loop: asyncio.AbstractEventLoop
) -> ApprovalGate:
    """The session's policy, with who answers its questions in this cell: ``--approve``
    auto or deny, the policy when headless, else the view's buttons. On a kernel that
    cannot deliver clicks during a run, the cell first says so (once: the gate is made
    once per cell run)."""
    kernel = kernel_state().kernel_limits
    if kernel is not None:
        print(kernel_notice(kernel), file=sys.stderr)
    mode = plan.options.approve
    approver: Approver
    if mode == "auto":
        approver = AutoApprove()
    elif mode == "deny":
        approver = PolicyOnly()
    elif plan.headless:
        approver = HeadlessPolicy(kernel)
    else:
        approver = CellApprover(view, loop, headless_wait=plan.headless_wait)
    floor = admin_floor()  # the admin policy's approval floors ("Admin policy")
    if floor is not None:
        human: Approver = approver
        if mode == "auto":
            wait = plan.headless_wait
            human = (
                HeadlessPolicy(kernel)
                if plan.headless
                else CellApprover(view, loop, headless_wait=wait)
            )
        approver = FloorApprover(approver, human, floor)
        policy = FlooredPolicy.over(policy, floor)
    return ApprovalGate(policy=policy, approver=approver)
