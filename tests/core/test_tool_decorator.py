"""The ``@tool`` decorator, ``Tool`` and ``ToolRegistry``: schemas from type hints,
descriptions from docstrings, context injection, validation and the registry."""

from __future__ import annotations

import asyncio
import inspect
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from mibyan_jupyter.core import (
    AbortSignal,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    tool,
)
from mibyan_jupyter.core.tools import ToolArgumentsError, parse_arguments


class Region(BaseModel):
    """A rectangle in pixels."""

    x: int
    y: int = 0


def call(
    t: Tool, args: dict[str, Any], *, call_id: str = "c1", updates: list[ToolResult] | None = None
) -> Any:
    """Validate and execute a tool directly (sync or async)."""
    validated = t.validate(args)
    sink = updates if updates is not None else []
    value = t.execute(call_id, validated, AbortSignal(), sink.append)
    if inspect.isawaitable(value):
        return asyncio.run(_await(value))
    return value


async def _await(value: Any) -> Any:
    return await value


# -- schema from type hints ----------------------------------------------------------------------


def test_schema_required_and_defaults() -> None:
    @tool
    def search(
        query: str, limit: int = 10, exact: bool = False, tags: list[str] | None = None
    ) -> str:
        """Search the notes."""
        return query

    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema
    props = schema["properties"]
    assert list(props) == ["query", "limit", "exact", "tags"]
    assert props["query"]["type"] == "string"
    assert props["limit"] == {"default": 10, "title": "Limit", "type": "integer"}
    assert props["exact"]["type"] == "boolean"
    assert props["exact"]["default"] is False
    assert props["tags"]["default"] is None
    assert {"type": "array", "items": {"type": "string"}} in props["tags"]["anyOf"]
    assert search.spec == ToolSpec("search", "Search the notes.", schema)


def test_schema_literal_and_constraints() -> None:
    @tool
    def resize(mode: Literal["fast", "exact"], scale: Annotated[float, Field(gt=0, le=4)]) -> str:
        """Resize."""
        return mode

    props = resize.parameters["properties"]
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert props["scale"]["exclusiveMinimum"] == 0
    assert props["scale"]["maximum"] == 4
    with pytest.raises(ToolArgumentsError, match="scale"):
        resize.validate({"mode": "fast", "scale": 0})
    with pytest.raises(ToolArgumentsError, match="mode"):
        resize.validate({"mode": "slow", "scale": 1})


def test_annotated_field_description_is_kept() -> None:
    @tool
    def fetch(
        url: Annotated[str, Field(description="The https URL to fetch.")],
        timeout: Annotated[float, Field(description="Seconds to wait.", gt=0)] = 5.0,
    ) -> str:
        """Fetch a page."""
        return url

    props = fetch.parameters["properties"]
    assert props["url"]["description"] == "The https URL to fetch."
    assert props["timeout"]["description"] == "Seconds to wait."
    assert props["timeout"]["exclusiveMinimum"] == 0
    assert props["timeout"]["default"] == 5.0
    assert fetch.parameters["required"] == ["url"]


def test_field_as_default_value_gives_default_and_description() -> None:
    @tool
    def page(number: int = Field(1, description="Page number, from 1.", ge=1)) -> int:
        """Show a page."""
        return number

    prop = page.parameters["properties"]["number"]
    assert prop["default"] == 1
    assert prop["description"] == "Page number, from 1."
    assert "required" not in page.parameters
    assert call(page, {}) == "1"


def test_nested_model_argument() -> None:
    seen: list[Region] = []

    @tool
    def crop(image: str, region: Region) -> str:
        """Crop an image.

        Args:
            image: The image path.
            region: The part to keep.
        """
        seen.append(region)
        return f"{image}@{region.x},{region.y}"

    schema = crop.parameters
    assert schema["required"] == ["image", "region"]
    assert schema["properties"]["region"]["$ref"] == "#/$defs/Region"
    assert schema["properties"]["region"]["description"] == "The part to keep."
    region_schema = schema["$defs"]["Region"]
    assert region_schema["required"] == ["x"]
    assert set(region_schema["properties"]) == {"x", "y"}

    assert call(crop, {"image": "a.png", "region": {"x": 3}}) == "a.png@3,0"
    assert seen == [Region(x=3, y=0)]
    with pytest.raises(ToolArgumentsError, match=r"region\.x"):
        crop.validate({"image": "a.png", "region": {"y": 1}})


# -- descriptions ----------------------------------------------------------------------------


def test_description_is_first_docstring_paragraph() -> None:
    @tool
    def summarize(text: str) -> str:
        """Summarize a text
        in one sentence.

        This second paragraph explains details the model does not need.

        Args:
            text: The text.
        """
        return text

    assert summarize.description == "Summarize a text in one sentence."
    assert summarize.name == "summarize"


def test_google_style_args_with_continuations_and_types() -> None:
    @tool
    def plot(column: str, kind: str = "line", bins: int = 10, title: str = "") -> str:
        """Plot a column.

        Args:
            column (str): The column to plot; must exist
                in the current DataFrame.
            kind: The plot kind.
                Format: one of line, bar, hist.
            bins (int, optional): Number of bins
                for a histogram,
                ignored otherwise.

        Returns:
            column: not a parameter description.
        """
        return column

    props = plot.parameters["properties"]
    assert (
        props["column"]["description"] == "The column to plot; must exist in the current DataFrame."
    )
    assert props["kind"]["description"] == "The plot kind. Format: one of line, bar, hist."
    assert props["bins"]["description"] == "Number of bins for a histogram, ignored otherwise."
    assert "description" not in props["title"]  # not documented
    assert plot.description == "Plot a column."


def test_description_fallbacks_and_overrides() -> None:
    @tool
    def bare(x: int) -> int:
        return x

    assert bare.description == "bare"

    @tool(name="renamed-tool", description="Explicit description wins.")
    def documented(x: int) -> int:
        """Docstring description."""
        return x

    assert documented.name == "renamed-tool"
    assert documented.description == "Explicit description wins."


def test_tool_options_and_flags() -> None:
    @tool()
    def plain() -> str:
        """Plain."""
        return ""

    @tool(sequential=True, side_effects=False)
    def ask() -> str:
        """Ask the user."""
        return ""

    assert (plain.sequential, plain.side_effects) == (False, True)
    assert (ask.sequential, ask.side_effects) == (True, False)
    assert plain.parameters["properties"] == {}
    assert "required" not in plain.parameters


# -- ToolContext -----------------------------------------------------------------------------


def test_tool_context_is_excluded_from_schema_and_injected() -> None:
    contexts: list[ToolContext] = []

    @tool
    def work(steps: int, ctx: ToolContext, label: str = "job") -> str:
        """Work in steps.

        Args:
            steps: How many steps.
            ctx: Never shown to the model.
        """
        contexts.append(ctx)
        for i in range(steps):
            ctx.on_update(ToolResult(content=f"{label} {i}"))
        return "done"

    assert list(work.parameters["properties"]) == ["steps", "label"]
    assert work.parameters["required"] == ["steps"]
    assert "ctx" not in str(work.parameters)
    with pytest.raises(ToolArgumentsError, match="ctx"):
        work.validate({"steps": 1, "ctx": {}})

    updates: list[ToolResult] = []
    assert call(work, {"steps": 2}, call_id="call-9", updates=updates) == "done"
    [ctx] = contexts
    assert ctx.call_id == "call-9"
    assert isinstance(ctx.signal, AbortSignal)
    assert [u.content for u in updates] == ["job 0", "job 1"]


def test_tool_context_in_async_tool() -> None:
    @tool
    async def wait(ctx: ToolContext) -> str:
        """Wait a moment."""
        await asyncio.sleep(0)
        ctx.on_update(ToolResult(content="half"))
        return ctx.call_id

    updates: list[ToolResult] = []
    assert call(wait, {}, call_id="x1", updates=updates) == "x1"
    assert updates == [ToolResult(content="half")]
    assert wait.parameters["properties"] == {}


# -- rejected definitions --------------------------------------------------------------------


def test_var_positional_and_keyword_rejected() -> None:
    def star(*items: str) -> str:
        """Star."""
        return ""

    def double_star(a: int, **options: str) -> str:
        """Double star."""
        return ""

    with pytest.raises(TypeError, match=r"\*args"):
        tool(star)
    with pytest.raises(TypeError, match="double_star"):
        tool(double_star)


@pytest.mark.parametrize("name", ["", "has space", "dotted.name", "slash/name", "ü", "x" * 65])
def test_invalid_tool_names_rejected(name: str) -> None:
    def f() -> str:
        """F."""
        return ""

    if name:  # an empty name= means "use the function's name"
        with pytest.raises(ValueError, match="tool name"):
            tool(name=name)(f)
    with pytest.raises(ValueError, match="tool name"):
        Tool(name=name, description="d", parameters={"type": "object"}, execute=lambda *a: "")


def test_lambda_name_rejected_and_valid_names_accepted() -> None:
    with pytest.raises(ValueError, match="tool name"):
        tool(lambda: "x")
    for name in ("a", "read_file", "web-search", "T2", "x" * 64):
        assert Tool(name=name, description="d", parameters={}, execute=lambda *a: "").name == name


# -- sync / async detection ------------------------------------------------------------------


def test_async_function_detection() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    @tool
    def read(path: str) -> str:
        """Read."""
        return path

    assert fetch.is_async is True
    assert read.is_async is False
    assert inspect.iscoroutinefunction(fetch.execute)
    assert not inspect.iscoroutinefunction(read.execute)
    assert call(fetch, {"url": "u"}) == "u"
    assert call(read, {"path": "p"}) == "p"

    async def raw_async(call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> str:
        return "r"

    assert Tool(name="r", description="d", parameters={}, execute=raw_async).is_async is True
    assert Tool(name="s", description="d", parameters={}, execute=lambda *a: "").is_async is False


# -- validation ------------------------------------------------------------------------------


def test_extra_arguments_rejected() -> None:
    @tool
    def add(a: int, b: int = 0) -> int:
        """Add."""
        return a + b

    with pytest.raises(ToolArgumentsError, match="extra_arg: Extra inputs are not permitted"):
        add.validate({"a": 1, "extra_arg": 2})
    validated = add.validate({"a": "3"})  # lax mode: JSON-ish strings coerce
    assert (validated.a, validated.b) == (3, 0)


def test_validation_error_lists_every_problem() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    with pytest.raises(ToolArgumentsError) as info:
        add.validate({"a": "x"})
    text = str(info.value)
    assert "a: Input should be a valid integer" in text
    assert "b: Field required" in text
    assert "https://" not in text  # no pydantic docs URL in what the model reads
    with pytest.raises(ToolArgumentsError, match=r"\(arguments\)"):
        add.validate([1, 2])


def test_tool_without_model_requires_an_object() -> None:
    t = Tool(name="raw", description="d", parameters={"type": "object"}, execute=lambda *a: "")
    assert t.validate({"k": 1}) == {"k": 1}
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        t.validate([1, 2])


def test_parse_arguments() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments("  \n") == {}
    assert parse_arguments('{"a": 1}') == {"a": 1}
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        parse_arguments('{"a": ')


# -- return values through the decorator -------------------------------------------------------


def test_return_value_conversion() -> None:
    @tool
    def as_dict() -> dict[str, int]:
        """D."""
        return {"a": 1}

    @tool
    def as_model() -> Region:
        """M."""
        return Region(x=1)

    @tool
    def as_result() -> ToolResult:
        """R."""
        return ToolResult(content="r", details={"k": 1}, is_error=True)

    @tool
    def as_str() -> str:
        """S."""
        return '{"already": "text"}'

    assert call(as_dict, {}) == '{"a":1}'
    assert call(as_model, {}) == '{"x":1,"y":0}'
    assert call(as_result, {}) == ToolResult(content="r", details={"k": 1}, is_error=True)
    assert call(as_str, {}) == '{"already": "text"}'


# -- registry --------------------------------------------------------------------------------


def _named(name: str) -> Tool:
    return Tool(name=name, description=name, parameters={"type": "object"}, execute=lambda *a: "")


def test_registry_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match="'a' is already registered"):
        ToolRegistry([_named("a"), _named("b"), _named("a")])
    registry = ToolRegistry([_named("a")])
    with pytest.raises(ValueError, match="already registered"):
        registry.add(_named("a"))
    assert list(registry) == ["a"]


def test_registry_mapping_behaviour() -> None:
    a, b = _named("a"), _named("b")
    registry = ToolRegistry([a, b])
    assert len(registry) == 2
    assert registry["a"] is a
    assert registry.get("zzz") is None
    assert "b" in registry
    assert list(registry) == ["a", "b"]
    registry.remove("a")
    assert list(registry) == ["b"]
    with pytest.raises(KeyError):
        registry.remove("a")


def test_registry_specs_cached_and_invalidated() -> None:
    registry = ToolRegistry([_named("a"), _named("b")])
    first = registry.specs()
    assert [s.name for s in first] == ["a", "b"]
    assert registry.specs() is first  # cached: no rebuild per model call

    registry.add(_named("c"))
    second = registry.specs()
    assert second is not first
    assert [s.name for s in second] == ["a", "b", "c"]
    assert registry.specs() is second

    registry.remove("b")
    third = registry.specs()
    assert [s.name for s in third] == ["a", "c"]
    assert registry.specs() is third
    assert ToolRegistry().specs() == ()


def test_field_default_keeps_the_docstring_description() -> None:
    from pydantic import Field

    @tool
    def limited(count: int = Field(3, ge=1)) -> int:
        """Count things.

        Args:
            count: How many.
        """
        return count

    schema = limited.parameters["properties"]["count"]
    assert schema["description"] == "How many."
    assert schema["minimum"] == 1
