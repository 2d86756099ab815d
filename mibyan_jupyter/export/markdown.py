"""A session as one Markdown document: the notebook's content as headings and blocks.

For reading and sharing where a notebook is too heavy (an issue, a chat, a diff). Code the
agent ran becomes a ``python`` block followed by its outputs as text; images are noted,
not embedded. The whole document is sanitized at once, because whether a fence is code
depends on everything before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mibyan_jupyter.core.messages import Message
from mibyan_jupyter.export.fences import code_span, fence
from mibyan_jupyter.export.outputs import plain_text
from mibyan_jupyter.export.render import (
    Code,
    SessionMeta,
    blocks,
    header,
    redacted,
    redacted_meta,
)
from mibyan_jupyter.export.sanitize import sanitize_markdown
from mibyan_jupyter.secrets import REDACT


def export_markdown(messages: Sequence[Message], *, session: SessionMeta) -> str:
    """The transcript as Markdown (secrets redacted, HTML and links sanitized, thinking
    left out), ending with a newline."""
    title, facts = header(redacted_meta(session))
    parts = [f"# {title}", facts]
    for block in blocks(redacted(messages)):
        if isinstance(block, Code):
            parts.append("### Python")
            parts.append(fence(block.source, "python"))
            parts.extend(_output(output) for output in block.outputs)
        else:
            level = "###" if block.speaker == "tool" else "##"
            parts.append(f"{level} {block.label}")
            parts.append(block.body)
    return REDACT(sanitize_markdown("\n\n".join(parts))) + "\n"


def _output(output: Mapping[str, Any]) -> str:
    text = plain_text(output)
    kind = output["output_type"]
    if kind == "stream":
        block = fence(text, "text")
        return block if output["name"] == "stdout" else f"*stderr:*\n\n{block}"
    if kind == "error":
        name = code_span(f"{output['ename']}: {output['evalue']}")
        return f"**Error:** {name}\n\n{fence(text, 'text')}" if text else f"**Error:** {name}"
    parts = [fence(text, "text")] if text else []
    if any(mime.startswith("image/") for mime in output["data"]):
        parts.append("*(image not included)*")
    return "\n\n".join(parts) or "*(output not shown)*"
