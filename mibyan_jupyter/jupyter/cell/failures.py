"""How a ``%%agent`` cell ends when its run failed or was interrupted: one red line, so
Run All stops there.

A failed provider call used to end the cell "ok" (the view said "error", the cell did not),
and Run All carried on into cells that needed the answer. Now a run whose end reason is
``error`` raises :class:`AgentFailed` after its view is finished: IPython shows
``_render_traceback_``'s one line (the provider's text names the endpoint and what to do,
``providers/errors.py``), and the execute reply's status is "error"
(docs/architecture.md, "Running inside the kernel").
"""

from __future__ import annotations

from collections.abc import Sequence

from mibyan_jupyter.core.messages import AssistantMessage, Message
from mibyan_jupyter.secrets import REDACT

SAVED = "the conversation so far is saved"


class AgentInterrupted(Exception):
    """Kernel > Interrupt stopped the run: one red line (and Run All stops here)."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentInterrupted: {self}"]


class AgentFailed(Exception):
    """The run ended with a provider or internal error: one red line naming it."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentFailed: {self}"]


def failure_line(messages: Sequence[Message]) -> str:
    """What failed, from the last failed reply of the run."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.stop_reason == "error":
            error = REDACT(message.error_message or "unknown error")
            return f"the model call failed: {error}; {SAVED}"
    return f"the run ended with an error; {SAVED}"


def internal_line(error: BaseException) -> str:
    """A bug of ours inside the run, as one line (the log has its traceback)."""
    return f"internal error: {REDACT(f'{type(error).__name__}: {error}')}; {SAVED}"
