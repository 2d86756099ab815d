"""The prompt builder: layers in a fixed order, rendered once per change, so the system
block of consecutive requests is byte-identical (the provider's prompt cache keeps hitting)."""

from __future__ import annotations

import pytest

from mibyan_jupyter.core.prompt import PromptBuilder, PromptLayers, render, tool_guidance
from mibyan_jupyter.core.tools import tool


@tool(side_effects=False)
def list_variables() -> str:
    """List the user's variables."""
    return ""


@tool
def run_python(code: str) -> str:
    """Run code.

    Args:
        code: the code
    """
    return code


def test_layers_render_in_a_fixed_order_and_empty_ones_are_left_out() -> None:
    text = render(
        PromptLayers(
            instructions="Be brief.",
            tool_guidance="Tools: x",
            context="Notebook: sales.ipynb",
            memory="- likes pandas",
            pins=("answer in French", "never delete files"),
        )
    )
    assert text == (
        "Be brief.\n\nTools: x\n\nNotebook: sales.ipynb\n\n"
        "Memory (from earlier sessions):\n- likes pandas\n\n"
        "Pinned instructions (always follow these):\n1. answer in French\n2. never delete files"
    )
    assert render(PromptLayers(instructions="Only this.")) == "Only this."


def test_tool_guidance_names_what_needs_approval_in_a_stable_order() -> None:
    guidance = tool_guidance([run_python, list_variables])
    assert guidance == tool_guidance([list_variables, run_python])
    assert "run without asking: list_variables" in guidance
    assert "need the user's approval (say briefly why before calling): run_python" in guidance
    assert tool_guidance([]) == ""


def test_the_prompt_is_the_same_object_until_a_layer_changes() -> None:
    builder = PromptBuilder(instructions="You help.", context="Notebook: a.ipynb")
    first = builder.build([list_variables])
    again = builder.build([list_variables])
    assert again is first
    assert builder.version == 1
    builder.build([list_variables, run_python])
    assert builder.version == 2
    builder.memory = "- prefers seaborn"
    changed = builder.build()
    assert builder.version == 3
    assert "prefers seaborn" in changed


def test_pins_are_numbered_and_unpinned_by_number() -> None:
    builder = PromptBuilder(instructions="x")
    assert builder.pin("  answer   in French ") == 1
    assert builder.pin("never delete files") == 2
    assert builder.pins == ("answer in French", "never delete files")
    assert "1. answer in French" in builder.build()
    assert builder.unpin(1) == "answer in French"
    assert builder.pins == ("never delete files",)
    assert "answer in French" not in builder.build()
    with pytest.raises(ValueError, match="there is no pin 5"):
        builder.unpin(5)
    with pytest.raises(ValueError, match="nothing to pin"):
        builder.pin("   ")
