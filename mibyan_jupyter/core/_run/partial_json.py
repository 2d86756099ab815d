"""Best-effort parsing of a tool call's arguments while they stream, for live display.

A model writes a tool call's arguments as JSON text over many deltas; showing them as they
grow (say, the code of a ``run_cell`` call line by line) needs a parser that accepts a
prefix. ``pydantic_core`` has one built in (the Rust parser pydantic already ships), so no
hand-written repair of brackets and quotes. Never used for execution: the call runs with
the complete arguments text from ``ToolCallEnd``.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json


def parse_partial(text: str) -> Any:
    """The value a JSON prefix stands for so far, or ``None`` when nothing parses yet.

    Unfinished strings are kept (``'{"code": "print(1'`` -> ``{"code": "print(1"}``);
    unfinished keys, numbers of an unfinished literal and so on are left out.
    """
    try:
        return from_json(text, allow_partial="trailing-strings")
    except ValueError:
        return None
