"""Tools: a name, a description, a JSON schema, and code that runs with ``(call_id, args,
signal, on_update)``.

A :class:`Tool` validates the model's arguments with a pydantic model, so a bad call gets
an error result the model can act on (with the arguments it sent) instead of a crash. The
``@tool`` decorator derives that model and the schema from a typed Python function; its
docstring's first paragraph becomes the description and a Google-style ``Args:`` section
describes the parameters.

Flags: ``sequential`` forces the whole batch a call belongs to to run one call at a time
(interactive tools, tools that share state); ``side_effects`` is the hint approval policies
read (a read-only tool is safe to run without asking).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import UnionType
from typing import Any, TypeAlias, Union, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_json

from .json_text import as_text, clean_json
from .messages import Content
from .signal import AbortSignal
from .stream import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns. ``content`` goes to the model; ``details`` to the UI/store."""

    content: Content
    details: dict[str, object] | None = None
    is_error: bool = False


OnUpdate: TypeAlias = Callable[[ToolResult], None]
Execute: TypeAlias = Callable[
    [str, Any, AbortSignal, OnUpdate], "ToolResult | str | Awaitable[ToolResult | str]"
]


CANCELLED = "Tool call cancelled by the user before it finished; its outcome is unknown."
"""The result text of a tool call an abort cut short. The loop gives it to every call that
had not finished (a sync tool's late result is dropped); the store recognises it to record
the call as cancelled rather than failed."""


class ToolArgumentsError(ValueError):
    """The model's arguments did not match the tool's schema."""


task_id_var: ContextVar[str | None] = ContextVar("mibyan_task_id", default=None)
"""The task a tool call runs under: a delegated child's id (core/delegation.py sets it for
the child's run, and sync tools see it too: they run in a copy of the caller's context);
``None`` at the top level."""


def current_task_id() -> str | None:
    """The task id of the running tool call (for tools that take no :class:`ToolContext`)."""
    return task_id_var.get()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Passed to a ``@tool`` function that declares a parameter of this type."""

    call_id: str
    signal: AbortSignal
    on_update: OnUpdate
    task_id: str | None = None
    """The delegated child this call runs in (``None``: the top-level agent)."""


@dataclass(eq=False)
class Tool:
    """A tool the model may call. ``args_model`` validates arguments; ``execute`` receives
    the validated model instance (or the raw dict when ``args_model`` is ``None``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    args_model: type[BaseModel] | None = None
    sequential: bool = False
    side_effects: bool = True
    prepare_arguments: Callable[[Any], Any] | None = None
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what every provider accepts)"
            )
        self.is_async = inspect.iscoroutinefunction(self.execute)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def validate(self, args: Any) -> Any:
        """Validated arguments; raises :class:`ToolArgumentsError` naming what was wrong."""
        if self.args_model is None:
            if not isinstance(args, dict):
                raise ToolArgumentsError(f"arguments must be a JSON object, got {_short(args)}")
            return args
        try:
            return self.args_model.model_validate(args)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in error.errors(include_url=False)
            )
            raise ToolArgumentsError(problems) from None


def _short(value: Any, limit: int = 200) -> str:
    text = to_json(value, fallback=repr).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


_ARG_LINE = re.compile(r"(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_ARG_SECTIONS = ("Args:", "Arguments:", "Parameters:")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its first paragraph and its Google-style ``Args:`` entries."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in _ARG_SECTIONS]
    end = starts[0] if starts else len(lines)
    description = "\n".join(lines[:end]).strip().split("\n\n")[0].replace("\n", " ")
    params: dict[str, str] = {}
    current: str | None = None
    base_indent: int | None = None
    for line in lines[end + 1 :] if starts else []:
        if line.strip() and not line[0].isspace():
            break  # the next section
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.fullmatch(line.strip())
        if match and (base_indent is None or indent == base_indent):
            base_indent = indent
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return description, params


def _is_context(annotation: Any) -> bool:
    """``ToolContext``, also as ``ToolContext | None`` / ``Optional[ToolContext]``."""
    if annotation is ToolContext:
        return True
    return get_origin(annotation) in (Union, UnionType) and ToolContext in get_args(annotation)


def _field_for(param: inspect.Parameter, doc: str | None) -> Any:
    """The pydantic field of a parameter: its default (or a ``Field(...)`` default as
    given), with the docstring's description when the annotation has none of its own."""
    default = param.default
    if isinstance(default, FieldInfo):
        if doc and default.description is None:
            # A copy with .description set is ignored by pydantic >= 2.14; merging makes a
            # new FieldInfo (and never mutates the caller's).
            default = FieldInfo.merge_field_infos(default, description=doc)
        return default
    value = ... if default is param.empty else default
    return Field(value, description=doc) if doc else value


def _build_tool(
    func: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    sequential: bool,
    side_effects: bool,
) -> Tool:
    doc_description, doc_params = _parse_docstring(func.__doc__)
    hints = get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {func.__name__}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        fields[param.name] = (annotation, _field_for(param, doc_params.get(param.name)))
    model = create_model(f"{func.__name__}_arguments", __base__=_Arguments, **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    is_async = inspect.iscoroutinefunction(func)

    def kwargs_of(
        args: BaseModel, call_id: str, signal: AbortSignal, on_update: OnUpdate
    ) -> dict[str, Any]:
        kwargs = {key: getattr(args, key) for key in fields}
        if context_param is not None:
            kwargs[context_param] = ToolContext(call_id, signal, on_update, task_id_var.get())
        return kwargs

    if is_async:

        async def execute_async(
            call_id: str, args: BaseModel, signal: AbortSignal, on_update: OnUpdate
        ) -> ToolResult | str:
            return _as_result(await func(**kwargs_of(args, call_id, signal, on_update)))

        execute: Execute = execute_async
    else:

        def execute_sync(
            call_id: str, args: BaseModel, signal: AbortSignal, on_update: OnUpdate
        ) -> ToolResult | str:
            return _as_result(func(**kwargs_of(args, call_id, signal, on_update)))

        execute = execute_sync

    return Tool(
        name=func.__name__ if name is None else name,
        description=description if description is not None else (doc_description or func.__name__),
        parameters=schema,
        execute=execute,
        args_model=model,
        sequential=sequential,
        side_effects=side_effects,
    )


def _as_result(value: Any) -> ToolResult | str:
    """Tool return values: a ToolResult or str as is, anything else as JSON text."""
    if isinstance(value, ToolResult):
        return value
    return as_text(value)


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    side_effects: bool = True,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    side_effects: bool = True,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    Use bare (``@tool``) or with options (``@tool(side_effects=False)``). A parameter
    annotated :class:`ToolContext` receives the call id, the abort signal and ``on_update``.
    """

    def decorate(f: Callable[..., Any]) -> Tool:
        return _build_tool(
            f, name=name, description=description, sequential=sequential, side_effects=side_effects
        )

    return decorate(func) if func is not None else decorate


def parse_arguments(text: str) -> Any:
    """Parse a tool call's JSON arguments; an empty string means no arguments."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ToolArgumentsError(
            f"arguments are not valid JSON ({error.msg} at {error.pos})"
        ) from None
    except RecursionError:
        raise ToolArgumentsError("arguments are nested too deeply") from None
    # A "\ud83d" escape decodes to a lone surrogate no encoder accepts: clean it here,
    # where the model's text enters the tools (cheap test first: most arguments have none).
    return clean_json(value) if "\\ud" in text.lower() else value


class ToolRegistry(Mapping[str, Tool]):
    """Tools by name; refuses duplicates, which a model could not tell apart."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] | None = None
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> None:
        if item.name in self._tools:
            raise ValueError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self._specs = None

    def remove(self, name: str) -> None:
        del self._tools[name]
        self._specs = None

    def specs(self) -> tuple[ToolSpec, ...]:
        if self._specs is None:
            self._specs = tuple(t.spec for t in self._tools.values())
        return self._specs

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)
