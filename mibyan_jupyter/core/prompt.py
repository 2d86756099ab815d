"""The prompt builder: the effective system prompt, assembled from layers and cached.

Why layers, and why a cache: the system block is the head of every request, and providers
cache prompts by prefix (Anthropic's ``cache_control``, OpenAI's automatic prefix cache). A
system prompt rebuilt with the slightest difference each turn (a timestamp, a reordered list)
misses that cache on every call of a long session. So the prompt is built from a few stable
layers, in a fixed order, and re-rendered only when one of them changes; everything that
changes per request (budget warnings, context pressure, the user's variables as they are now)
goes into *ephemeral* notes on the request instead, never into this block
(docs/architecture.md, "Prompt builder").

Layers, in order:

1. **instructions**: the configured system prompt (the session's, a cell's ``--system``).
2. **tool guidance**: derived from the registered tools (their names, whether they need
   the user's approval); the tools' schemas travel separately in the request.
3. **context**: stable facts the Jupyter layer supplies (notebook name, kernel, folder).
4. **memory**: the snapshot of the memory files (what the agent learned, the user's
   preferences), supplied by the memory layer.
5. **pins**: instructions the user pinned (``%agent pin TEXT``); never summarised away.

Pure: no I/O; the layers are given as text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .tools import Tool

MAX_GUIDANCE_TOOLS = 64
"""Past this many tools the guidance names only the count (the schemas still go)."""


@dataclass(frozen=True, slots=True)
class PromptLayers:
    """The layers a system prompt is built from (a value: equal layers, equal prompt)."""

    instructions: str = ""
    tool_guidance: str = ""
    context: str = ""
    memory: str = ""
    pins: tuple[str, ...] = ()


def tool_guidance(tools: Iterable[Tool]) -> str:
    """What the model should know about its tools beyond their schemas: which ones it has,
    and which need the user's approval (so it says what it is about to do, and does not
    retry a denied call). Sorted by name, so registration order never changes the text."""
    listed = sorted(tools, key=lambda t: t.name)
    if not listed:
        return ""
    if len(listed) > MAX_GUIDANCE_TOOLS:
        return (
            f"You have {len(listed)} tools. Calls with side effects need the user's approval; "
            "a denied call is final: do not retry it, say what you would have done."
        )
    asks = [t.name for t in listed if t.side_effects]
    free = [t.name for t in listed if not t.side_effects]
    lines = ["Tools:"]
    if free:
        lines.append(f"- run without asking: {', '.join(free)}")
    if asks:
        lines.append(
            f"- need the user's approval (say briefly why before calling): {', '.join(asks)}"
        )
        lines.append("- a denied call is final: do not retry it, say what you would have done")
    return "\n".join(lines)


def render(layers: PromptLayers) -> str:
    """The system prompt of ``layers``: non-empty layers in the fixed order, separated by
    a blank line; the memory and pins under headings the model can refer to."""
    parts = [layers.instructions.strip(), layers.tool_guidance.strip(), layers.context.strip()]
    if layers.memory.strip():
        parts.append("Memory (from earlier sessions):\n" + layers.memory.strip())
    if layers.pins:
        pinned = "\n".join(f"{n}. {text.strip()}" for n, text in enumerate(layers.pins, 1))
        parts.append("Pinned instructions (always follow these):\n" + pinned)
    return "\n\n".join(p for p in parts if p)


@dataclass
class PromptBuilder:
    """Holds the layers of one session's system prompt and renders it once per change.

    :meth:`build` returns the same string object until a layer changes (``version`` counts
    the changes), so the system block of consecutive requests is byte-identical and the
    provider's prompt cache keeps hitting."""

    instructions: str = ""
    context: str = ""
    memory: str = ""
    version: int = field(default=0, init=False)
    """How many times the rendered prompt changed (a test of the cache reads it)."""
    _pins: list[str] = field(default_factory=list, init=False, repr=False)
    _tools_key: tuple[tuple[str, bool], ...] = field(default=(), init=False, repr=False)
    _guidance: str = field(default="", init=False, repr=False)
    _layers: PromptLayers | None = field(default=None, init=False, repr=False)
    _text: str = field(default="", init=False, repr=False)

    # -- layers ---------------------------------------------------------------------------

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Derive the tool guidance (cheap when the tools are the same as before)."""
        listed = list(tools)
        key = tuple(sorted((t.name, t.side_effects) for t in listed))
        if key != self._tools_key:
            self._tools_key, self._guidance = key, tool_guidance(listed)

    @property
    def pins(self) -> tuple[str, ...]:
        return tuple(self._pins)

    def pin(self, text: str) -> int:
        """Pin an instruction; returns its number (1-based, as ``%agent pins`` shows it)."""
        cleaned = " ".join(text.split())
        if not cleaned:
            raise ValueError("nothing to pin: give the instruction's text")
        self._pins.append(cleaned)
        return len(self._pins)

    def unpin(self, number: int) -> str:
        """Remove pin ``number`` (1-based); returns its text."""
        if not 1 <= number <= len(self._pins):
            raise ValueError(f"there is no pin {number}: {len(self._pins)} pinned")
        return self._pins.pop(number - 1)

    # -- the prompt -----------------------------------------------------------------------

    def layers(self) -> PromptLayers:
        return PromptLayers(
            instructions=self.instructions,
            tool_guidance=self._guidance,
            context=self.context,
            memory=self.memory,
            pins=tuple(self._pins),
        )

    def build(self, tools: Iterable[Tool] | None = None) -> str:
        """The system prompt (given ``tools``, the guidance follows them first); rendered
        again only when a layer differs from the last build."""
        if tools is not None:
            self.set_tools(tools)
        layers = self.layers()
        if layers != self._layers:
            self._layers, self._text = layers, render(layers)
            self.version += 1
        return self._text
