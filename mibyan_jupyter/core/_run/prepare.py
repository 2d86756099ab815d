"""Preparing one tool call: lookup, arguments, ``before_tool_call``, approval.

Preparation decides, before anything runs, whether a call may run and with which
arguments. Every way it can fail becomes an error result the model can act on: an unknown
tool (with the tools that exist), arguments that are not JSON or do not fit the schema
(with what was received), a ``prepare_arguments`` or ``before_tool_call`` that raises, a
block, a denial (with the reason, and a request not to retry the same call). "Raises"
means any ``BaseException`` but the few that stop the run (:func:`passes_through`), and
those rules hold for the tool itself too (see :mod:`.execute`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mibyan_jupyter.core.config import BeforeToolCall, Block
from mibyan_jupyter.core.messages import AssistantMessage, ToolCall
from mibyan_jupyter.core.tools import (
    CANCELLED,
    Tool,
    ToolArgumentsError,
    ToolResult,
    parse_arguments,
)

from .scope import RunScope
from .waiting import maybe_await


@dataclass(slots=True)
class Prepared:
    """A call that passed preparation: it may run."""

    call: ToolCall
    tool: Tool
    args: Any


@dataclass(slots=True)
class Outcome:
    """A call's final result (possibly decided during preparation)."""

    call: ToolCall
    result: ToolResult


def error_result(text: str) -> ToolResult:
    return ToolResult(content=text, is_error=True)


def closing(error: BaseException) -> bool:
    """Whether ``error`` is the ``GeneratorExit`` of the catching coroutine being closed
    (raised at its own ``await``, so its traceback has that one frame), as opposed to one
    a tool or hook raised: a closing coroutine must let it go and await nothing more."""
    traceback = error.__traceback__
    return isinstance(error, GeneratorExit) and traceback is not None and traceback.tb_next is None


def passes_through(error: BaseException) -> bool:
    """Whether an exception from a tool or a hook stops the run instead of becoming an
    error result: the run's own cancellation, Kernel > Interrupt, a closing coroutine."""
    return isinstance(error, asyncio.CancelledError | KeyboardInterrupt) or closing(error)


def describe_error(error: BaseException) -> str:
    """``Type: message`` for the model; never fails (an exception's ``__str__`` may)."""
    name = type(error).__name__
    try:
        text = str(error)
    except Exception:
        text = "(its message could not be read)"
    if isinstance(error, SystemExit):  # argparse exits on bad arguments, even in a tool
        text = f"{text + ' ' if text else ''}(the tool tried to exit the process)"
    return f"{name}: {text}" if text else name


def display_args(call: ToolCall) -> Any:
    try:
        return parse_arguments(call.function.arguments)
    except ToolArgumentsError:
        return call.function.arguments


def _args_dict(args: Any) -> dict[str, Any]:
    if isinstance(args, BaseModel):
        return args.model_dump(mode="json")
    return dict(args) if isinstance(args, dict) else {}


async def prepare_call(
    call: ToolCall, message: AssistantMessage, scope: RunScope
) -> Prepared | Outcome:
    """Decide whether ``call`` (of ``message``) may run; approval events go out through
    the scope's ``emit``."""
    name = call.function.name
    tool = scope.tools.get(name)
    if tool is None:
        available = ", ".join(scope.tools) or "none"
        return Outcome(
            call, error_result(f"Tool {name!r} not found. Available tools: {available}.")
        )
    valid = _validated_arguments(call, tool)
    if isinstance(valid, ToolResult):
        return Outcome(call, valid)
    try:
        checked = await _checked(call, tool, valid.args, message, scope)
    except BaseException as error:
        if passes_through(error):
            raise
        checked = error_result(f"before_tool_call failed: {describe_error(error)}")
    if isinstance(checked, ToolResult):
        return Outcome(call, checked)
    if scope.signal.aborted:
        return Outcome(call, error_result(CANCELLED))
    return Prepared(call, tool, checked.args)


@dataclass(slots=True)
class _Allowed:
    """The arguments a call may run with, after the hook and approval (may be replaced)."""

    args: Any


def _validated_arguments(call: ToolCall, tool: Tool) -> _Allowed | ToolResult:
    """The call's arguments parsed, prepared and validated, or the error result to give
    the model (with what it sent, so it can correct the call)."""
    name, received = call.function.name, call.function.arguments
    try:
        raw = parse_arguments(received)
        if tool.prepare_arguments is not None:
            raw = tool.prepare_arguments(raw)
        return _Allowed(tool.validate(raw))
    except ToolArgumentsError as error:
        return error_result(
            f"Invalid arguments for {name}: {error}. Received: {received or '(empty)'}"
        )
    except BaseException as error:  # a prepare_arguments hook, a validator of the tool's own
        if passes_through(error):
            raise
        return error_result(f"Preparing the arguments of {name} failed: {describe_error(error)}")


async def _checked(
    call: ToolCall, tool: Tool, args: Any, message: AssistantMessage, scope: RunScope
) -> _Allowed | ToolResult:
    """``before_tool_call``, then the approval gate: the arguments to run with, or the
    error result of a block or a denial. Exceptions are the caller's to report."""
    config, name = scope.config, call.function.name
    hook = config.before_tool_call
    if hook is not None:
        verdict = await maybe_await(
            hook(BeforeToolCall(message, call, tool, args, scope.transcript), scope.signal)
        )
        if isinstance(verdict, Block):
            return error_result(verdict.reason)
    gate = config.approval
    if gate is None:
        return _Allowed(args)
    outcome = await gate.check(
        call.id,
        name,
        _args_dict(args),
        side_effects=tool.side_effects,
        emit=scope.emit,
        signal=scope.signal,
    )
    if not outcome.approved:
        reason = outcome.reason or "the user denied it"
        return error_result(
            f"The call to {name} was denied: {reason.rstrip('.')}. Do not retry the same call; "
            "ask the user or try a different approach."
        )
    if outcome.args is None:
        return _Allowed(args)
    try:
        return _Allowed(tool.validate(dict(outcome.args)))
    except ToolArgumentsError as error:
        return error_result(f"The arguments given at approval are invalid: {error}")
