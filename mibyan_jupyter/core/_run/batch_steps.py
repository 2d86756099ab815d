"""The steps of a tool batch that need no batch state (core/_run/batch.py runs them).

Kept apart so the batch module is its two schedules (sequential and parallel) and their
cancellation: whether the approval policy would ask about a call (the batch asks every
such question at once, docs/architecture.md, "One `%%agent` cell, end to end"), a large
result kept aside with its preview in the transcript (core/results.py), and the result of
a call a ``length`` stop cut off.
"""

from __future__ import annotations

from mibyan_jupyter.core.messages import ToolCall, ToolMessage
from mibyan_jupyter.core.results import SPILL_DETAILS_KEY, read_result_tool, spill

from .prepare import display_args
from .scope import RunScope


def truncated_callerror_result(name: str) -> str:
    """The error result of a call whose message hit the output token limit."""
    return (
        f"Tool call {name!r} was not executed: the response hit the output token limit, so "
        "its arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def would_ask(call: ToolCall, scope: RunScope) -> bool:
    """Whether the approval policy would ask about ``call`` (judged on its arguments as
    sent: a hook that changes them may change the answer, which only moves when the
    question is put)."""
    gate, tool = scope.config.approval, scope.tools.get(call.function.name)
    if gate is None or tool is None:
        return False
    args = display_args(call)
    return gate.would_ask(
        call.function.name,
        args if isinstance(args, dict) else {},
        side_effects=tool.side_effects,
    )


def kept_aside(message: ToolMessage, scope: RunScope) -> ToolMessage:
    """A large result kept aside, its preview in the transcript (core/results.py); a store
    that fails keeps the result whole rather than losing it. Once a preview says to call
    ``read_result``, the model can from the next call on."""
    config = scope.config
    if config.result_store is None or config.result_limit is None:
        return message
    try:
        kept = spill(message, config.result_store, config.result_limit)
    except Exception:
        return message
    if (
        kept.details
        and SPILL_DETAILS_KEY in kept.details
        and "read_result" not in (tools := scope.tools)
    ):
        tools.add(read_result_tool(config.result_store))
    return kept
