"""Preparing one tool call: lookup, arguments, ``before_tool_call``, approval.

Preparation decides, before anything runs, whether a call may run and with which
arguments. Every way it can fail becomes an error result the model can act on: an unknown
tool (with the tools that exist), arguments that are not JSON or do not fit the schema
(with what was received), a ``prepare_arguments`` or ``before_tool_call`` that raises, a
block, a denial (with the reason, and a request not to retry the same call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .config import BeforeToolCall, Block, LoopConfig
from .events import EventEmit
from .grammar import CANCELLED
from .messages import AssistantMessage, Message, ToolCall
from .signal import AbortSignal
from .tools import Tool, ToolArgumentsError, ToolRegistry, ToolResult, parse_arguments
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
    call: ToolCall,
    tools: ToolRegistry,
    config: LoopConfig,
    signal: AbortSignal,
    emit: EventEmit,
    message: AssistantMessage,
    transcript: Sequence[Message],
) -> Prepared | Outcome:
    """Decide whether ``call`` may run; approval events go out through ``emit``."""
    name = call.function.name
    tool = tools.get(name)
    if tool is None:
        available = ", ".join(tools) or "none"
        return Outcome(
            call, error_result(f"Tool {name!r} not found. Available tools: {available}.")
        )
    received = call.function.arguments
    try:
        raw = parse_arguments(received)
        if tool.prepare_arguments is not None:
            raw = tool.prepare_arguments(raw)
        args = tool.validate(raw)
    except ToolArgumentsError as error:
        return Outcome(
            call,
            error_result(
                f"Invalid arguments for {name}: {error}. Received: {received or '(empty)'}"
            ),
        )
    except Exception as error:
        return Outcome(
            call,
            error_result(
                f"Preparing the arguments of {name} failed: {type(error).__name__}: {error}"
            ),
        )
    try:
        hook = config.before_tool_call
        if hook is not None:
            verdict = await maybe_await(
                hook(
                    BeforeToolCall(message, call, tool, args, transcript),
                    signal,
                )
            )
            if isinstance(verdict, Block):
                return Outcome(call, error_result(verdict.reason))
        gate = config.approval
        if gate is not None:
            outcome = await gate.check(
                call.id,
                name,
                _args_dict(args),
                side_effects=tool.side_effects,
                emit=emit,
                signal=signal,
            )
            if not outcome.approved:
                reason = outcome.reason or "the user denied it"
                return Outcome(
                    call,
                    error_result(
                        f"The call to {name} was denied: {reason.rstrip('.')}. Do not retry the same call; "
                        "ask the user or try a different approach."
                    ),
                )
            if outcome.args is not None:
                try:
                    args = tool.validate(dict(outcome.args))
                except ToolArgumentsError as error:
                    return Outcome(
                        call, error_result(f"The arguments given at approval are invalid: {error}")
                    )
    except asyncio.CancelledError:
        raise
    except Exception as error:
        return Outcome(
            call, error_result(f"before_tool_call failed: {type(error).__name__}: {error}")
        )
    if signal.aborted:
        return Outcome(call, error_result(CANCELLED))
    return Prepared(call, tool, args)
