"""Any value a tool returns (or a model's parsed arguments), as text or plain JSON data that
every encoder downstream accepts.

Why a module of its own: a tool may return anything — a dict holding a file name that is
not valid UTF-8, a pydantic model, an object whose ``repr`` fails, a structure that refers
to itself — and what it returns goes to the model, the view and the store. ``as_text``
is what the model reads; ``clean_json`` is what ``details`` and parsed arguments become,
so none of them can fail an encoder later (docs/architecture.md, "Decisions").
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from .safe_text import clean_text

__all__ = ["as_text", "clean_json"]


def as_text(value: Any) -> str:
    """A str as is; a pydantic model, dict, list, number... as JSON text for the model.
    A value JSON cannot encode as it is (a lone surrogate in a file name, a cycle) is
    encoded from :func:`clean_json` of it instead of failing the tool."""
    if isinstance(value, str):
        return value
    try:
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return to_json(value, fallback=repr).decode()
    except Exception:
        return to_json(clean_json(value)).decode()


_MAX_DEPTH = 64


def clean_json(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON data with valid Unicode (see ``core/safe_text.py``): text
    cleaned, mapping keys as text, sequences and sets as lists, numbers, booleans and
    ``None`` kept, anything else (and what nests deeper than 64 levels) as its text.
    Why: tool details and parsed arguments go to the view and the store, which must be
    able to encode whatever a tool or a model produced."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if _depth >= _MAX_DEPTH:
        return _repr_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | Set):
        return [clean_json(item, _depth + 1) for item in value]
    if isinstance(value, BaseModel):
        try:
            return clean_json(value.model_dump(), _depth + 1)
        except Exception:
            return _repr_text(value)
    return _repr_text(value)


def _repr_text(value: Any) -> str:
    try:
        return clean_text(to_json(value, fallback=repr).decode())
    except Exception:
        try:
            return clean_text(repr(value))
        except Exception:
            return f"<a {type(value).__name__} that could not be shown>"
