"""A finished run as a static mimebundle: what the cell keeps when the live view is gone.

Shown when a ``%%agent`` run ends (in the live view's place) and by ``%agent resume`` for a
stored history. The saved notebook must show the conversation with no kernel, no widget
state and no extension, so this is plain HTML (with ``text/markdown`` and ``text/plain``
beside it for other front ends). It is the third layout of :func:`.render.blocks`, next to
the notebook and the Markdown export, so the content decisions (pairing calls with results,
truncation, which code counts as run) are made once for all three; only the layout is made
here, plus the thinking, which the file exports leave out. The structure is built from our
own strings; every piece of model or tool output in it went through
:func:`.html.markdown_html` (the shared sanitizer, then nh3) or is a PNG validated by
:mod:`.media`. Secrets are redacted first, on the whole transcript, before anything is cut.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mibyan_jupyter.core.messages import AssistantMessage, Message, ToolMessage, Usage
from mibyan_jupyter.export.children import ChildTranscript, child_section
from mibyan_jupyter.export.fences import clipped, code_span, fence
from mibyan_jupyter.export.html import clean_html, markdown_html
from mibyan_jupyter.export.media import MAX_IMAGES, png_data_url
from mibyan_jupyter.export.notices import (
    Placed,
    Shown,
    notice_html,
    notice_markdown,
    notice_text,
)
from mibyan_jupyter.export.outputs import plain_text
from mibyan_jupyter.export.render import (
    RESULT_LIMIT,
    RUN_PYTHON,
    Block,
    Code,
    Prose,
    SessionMeta,
    blocks,
    redacted,
)
from mibyan_jupyter.export.sanitize import sanitize_markdown
from mibyan_jupyter.secrets import REDACT

CODE_LIMIT = 10_000
HTML_OUTPUT_LIMIT = 20_000
"""A larger HTML output (a huge table) is shown as its text form, clipped."""

_STYLE = {
    "root": "border-left:3px solid var(--jp-brand-color1,#1976d2);padding-left:10px",
    "user": "background:var(--jp-layout-color2,#f3f3f3);border-radius:4px;padding:2px 8px;"
    "overflow-x:auto",
    "assistant": "overflow-x:auto",
    "tool": "border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;"
    "padding:2px 8px;margin:6px 0;overflow-x:auto",
    "label": "font-size:0.85em;font-weight:600;color:var(--jp-ui-font-color2,#616161)",
    "footer": "font-size:0.85em;color:var(--jp-ui-font-color2,#757575);margin-top:6px",
}


def render_transcript(
    messages: Sequence[Message],
    *,
    session: SessionMeta,
    status: str,
    demo: bool = False,
    usage: Usage | None = None,
    notices: Sequence[Placed] = (),
    children: Sequence[ChildTranscript] = (),
    reviewable: str | None = None,
) -> dict[str, str]:
    """The run as ``text/html``, ``text/markdown`` and ``text/plain``.

    The footer names ``session`` (id, title, model; ``demo``: the scripted demo model
    answered) and counts ``usage``, by default the sum of the assistant messages' usage:
    the messages shown, not the whole session (``session.usage`` and ``session.cost`` are
    not read). ``notices`` (compaction receipts, notes) are shown where they happened, as
    notices, never as messages (docs/architecture.md, "Context compression"). ``children``:
    delegated child agents, each folded under the message whose call started it."""
    clean = redacted(messages)
    if usage is None:
        usage = sum((m.usage for m in clean if isinstance(m, AssistantMessage)), Usage())
    turns = sum(isinstance(m, AssistantMessage) for m in clean)
    html_parts: list[str] = []
    md_parts: list[str] = []
    text_parts: list[str] = []
    for item in _interleaved(_segments(clean), notices):
        if not isinstance(item, list):
            _add_notice(item, html_parts, md_parts, text_parts)
            continue
        segment = item
        head = segment[0]
        thinking = _thinking(head) if isinstance(head, AssistantMessage) else ""
        items = blocks(segment)
        if thinking and not any(isinstance(b, Prose) and b.speaker == "assistant" for b in items):
            html_parts.append(
                _div("mibyan-assistant", _thinking_html(thinking), _STYLE["assistant"])
            )
        for block in items:
            html_parts.append(_block_html(block, thinking))
            md_parts.append(_block_markdown(block))
            text_parts.append(_block_text(block))
        calls = {m.tool_call_id for m in segment if isinstance(m, ToolMessage)}
        for child in (c for c in children if c.parent_call_id in calls):
            nested = render_transcript(child.messages, session=child.session, status=child.status)
            folded_html, folded_md, folded_text = child_section(child, nested)
            html_parts.append(folded_html)
            md_parts.append(folded_md)
            text_parts.append(folded_text)
    footer = REDACT(_footer(session, demo, status, usage, turns))
    if reviewable:  # the admin policy's line, as the live header said it ("Admin policy")
        html_parts.append(
            f'<div class="mibyan-reviewable" style="{_STYLE["footer"]}">{_e(reviewable)}</div>'
        )
        md_parts.append(f"*{reviewable}*")
        text_parts.append(reviewable)
    html_parts.append(f'<div class="mibyan-footer" style="{_STYLE["footer"]}">{_e(footer)}</div>')
    return {
        "text/html": (
            f'<div class="mibyan-transcript" data-status="{_e(status)}" style="{_STYLE["root"]}">'
            + "".join(html_parts)
            + "</div>"
        ),
        "text/markdown": sanitize_markdown("\n\n".join([*md_parts, f"*{footer}*"])),
        "text/plain": "\n\n".join([*text_parts, footer]),
    }


def _interleaved(
    segments: list[list[Message]], notices: Sequence[Placed]
) -> Iterator[list[Message] | Shown]:
    """The segments with each notice before the first segment starting at or after its
    place (a place inside a segment: after that segment), in their given order."""
    pending = sorted(notices, key=lambda placed: placed.at)  # stable: same place, same order
    next_notice = start = 0
    for segment in segments:
        while next_notice < len(pending) and pending[next_notice].at <= start:
            yield pending[next_notice].notice
            next_notice += 1
        yield segment
        start += len(segment)
    for placed in pending[next_notice:]:
        yield placed.notice


def _add_notice(notice: Shown, html_parts: list[str], md: list[str], text: list[str]) -> None:
    shown = notice_html(notice)
    if shown:
        html_parts.append(shown)
        md.append(notice_markdown(notice))
        text.append(notice_text(notice))


def _segments(messages: Sequence[Message]) -> list[list[Message]]:
    """Each message that is not a tool result starts a segment; results join the segment
    of the message that asked for them, so ``blocks`` pairs them."""
    out: list[list[Message]] = []
    for message in messages:
        if isinstance(message, ToolMessage) and out:
            out[-1].append(message)
        else:
            out.append([message])
    return out


def _thinking(message: AssistantMessage) -> str:
    return "\n\n".join(t.text for t in message.thinking if t.text.strip())


def _footer(session: SessionMeta, demo: bool, status: str, usage: Usage, turns: int) -> str:
    tokens = usage.total or usage.input + usage.output
    cost = "cost unknown" if usage.cost is None else f"${usage.cost:.4f}"
    model = session.model or ""
    model = f"{model} (demo model)" if demo else model
    facts = [model, f"{turns} {'turn' if turns == 1 else 'turns'}", f"{tokens:,} tokens", cost]
    facts.append(status.replace("_", " "))
    ident = f"session {session.id[:12]}" if session.id else ""
    title = (session.title or "").strip()
    title = title.splitlines()[0] if title else ""
    return " · ".join([*facts, *(x for x in (title, ident) if x)])


# -- HTML --------------------------------------------------------------------------------


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _div(cls: str, inner: str, style: str = "") -> str:
    styled = f' style="{style}"' if style else ""
    return f'<div class="{cls}"{styled}>{inner}</div>'


def _label(text: str) -> str:
    return f'<div class="mibyan-label" style="{_STYLE["label"]}">{_e(text)}</div>'


def _thinking_html(text: str) -> str:
    shown, note = _clip_note(text, RESULT_LIMIT)
    return (
        '<details class="mibyan-thinking"><summary>Thinking</summary>'
        f"<pre>{_e(shown)}</pre>{note}</details>"
    )


def _block_html(block: Block, thinking: str) -> str:
    if isinstance(block, Code):
        code = clipped(block.source, "python", CODE_LIMIT)
        outputs = "".join(_output_html(o) for o in block.outputs[:50])
        inner = _label(f"Python ({RUN_PYTHON})") + markdown_html(code) + outputs
        return _div("mibyan-tool", inner, _STYLE["tool"])
    body = markdown_html(block.body)
    if block.speaker == "user":
        return _div("mibyan-user", _label("You") + body, _STYLE["user"])
    if block.speaker == "assistant":
        inner = (_thinking_html(thinking) if thinking else "") + body
        return _div("mibyan-assistant", inner, _STYLE["assistant"])
    if block.speaker == "tool":
        label = f'<div class="mibyan-label" style="{_STYLE["label"]}">'
        return _div(
            "mibyan-tool", label + markdown_html(block.label) + "</div>" + body, _STYLE["tool"]
        )
    return _div("mibyan-system", f"<details><summary>{_e(block.label)}</summary>{body}</details>")


def _output_html(output: Mapping[str, Any]) -> str:
    kind = output["output_type"]
    if kind in ("display_data", "execute_result"):
        data = output["data"]
        image = png_data_url(data.get("image/png"))
        if image is not None:
            return f'<div class="mibyan-output"><img src="{image}" alt="output image"></div>'
        page = data.get("text/html")
        if isinstance(page, str) and len(page) <= HTML_OUTPUT_LIMIT:
            return f'<div class="mibyan-output">{clean_html(page)}</div>'
    return f'<div class="mibyan-output">{markdown_html(_output_markdown(output))}</div>'


def _clip_note(text: str, limit: int) -> tuple[str, str]:
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"<p><em>… (truncated, {len(text) - limit:,} more characters)</em></p>"


# -- Markdown and plain text ---------------------------------------------------------------


def _output_markdown(output: Mapping[str, Any]) -> str:
    kind = output["output_type"]
    text = plain_text(output)
    if kind == "stream":
        block = clipped(text, "text", RESULT_LIMIT)
        return block if output["name"] == "stdout" else f"*stderr:*\n\n{block}"
    if kind == "error":
        name = code_span(f"{output['ename']}: {output['evalue']}")
        return f"**Error:** {name}\n\n{clipped(text, 'text', RESULT_LIMIT)}" if text else name
    parts = [clipped(text, "text", RESULT_LIMIT)] if text else []
    if any(mime.startswith("image/") for mime in output["data"]):
        parts.append("*(image)*")
    return "\n\n".join(parts) or "*(output not shown)*"


def _block_markdown(block: Block) -> str:
    if isinstance(block, Code):
        outputs = [_output_markdown(o) for o in block.outputs[: MAX_IMAGES * 4]]
        return "\n\n".join(
            [f"**Python** ({code_span(RUN_PYTHON)})", fence(block.source, "python"), *outputs]
        )
    label = {"user": "You", "assistant": "Assistant"}.get(block.speaker, block.label)
    return f"**{label}**\n\n{block.body}"


def _block_text(block: Block) -> str:
    if isinstance(block, Code):
        outputs = [plain_text(o) for o in block.outputs]
        return "\n".join(["Python (run_python):", block.source, *(o for o in outputs if o)])
    label = {"user": "You", "assistant": "Assistant"}.get(block.speaker, block.label)
    return f"{label}:\n{block.body}"
