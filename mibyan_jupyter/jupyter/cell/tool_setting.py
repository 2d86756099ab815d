"""What the sources of a cell's tools may need to build them (docs/architecture.md,
"Tools from outside"): its own module, below the assembler (:mod:`.tool_sources`) and the
sources it calls, so each source can name the type without importing the assembler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mibyan_jupyter.core.agent import Agent
    from mibyan_jupyter.core.approval import ApprovalGate
    from mibyan_jupyter.jupyter.cell.cell_plan import CellPlan
    from mibyan_jupyter.jupyter.state import SessionHandle
    from mibyan_jupyter.jupyter.view import AgentView


@dataclass(frozen=True)
class ToolSetting:
    """What the sources may need to build one cell's tools."""

    plan: CellPlan
    agent: Agent
    approval: ApprovalGate
    namespace: dict[str, Any]
    root: Path
    shell: Any | None = None
    view: AgentView | None = None
    """The cell's live view (``None``: no view; ``clarify`` then answers that no one can)."""
    handle: SessionHandle | None = None
    """The session being run (its id and store writer), for delegated child sessions."""
    on_interrupt: Callable[[], None] | None = None
