"""Code cell outputs (nbformat v4 output dicts): made safe to keep, and read back as text.

Outputs a ``run_python`` call recorded come from code the model wrote, so they are as
untrusted as its text. Only MIME types that render without running anything are kept
(JavaScript, widget views and SVG, which can carry script, are dropped), HTML goes through
nh3 and Markdown through the Markdown sanitizer. Each output is rebuilt from the fields
nbformat defines, so a malformed one is dropped instead of making the notebook invalid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from mibyan_jupyter.export.sanitize import sanitize_html, sanitize_latex, sanitize_markdown

KEPT_MIME_TYPES = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/html",
        "text/latex",
        "image/png",
        "image/jpeg",
        "image/gif",
        "application/json",
    }
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def stream_output(name: Literal["stdout", "stderr"], text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def normalize_output(raw: object) -> dict[str, Any] | None:
    """A safe, valid copy of one recorded output, or ``None`` if it is not one."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("output_type")
    if kind == "stream":
        name, text = raw.get("name"), _text(raw.get("text"))
        if name in ("stdout", "stderr") and text is not None:
            return stream_output(name, text)
    elif kind == "error":
        ename, evalue, traceback = raw.get("ename"), raw.get("evalue"), raw.get("traceback")
        if (
            isinstance(ename, str)
            and isinstance(evalue, str)
            and isinstance(traceback, list)
            and all(isinstance(line, str) for line in traceback)
        ):
            return {
                "output_type": "error",
                "ename": ename,
                "evalue": evalue,
                "traceback": traceback,
            }
    elif kind in ("display_data", "execute_result"):
        data = _bundle(raw.get("data"))
        if data:
            metadata = raw.get("metadata")
            output: dict[str, Any] = {
                "output_type": kind,
                "data": data,
                "metadata": {k: v for k, v in metadata.items() if k in data}
                if isinstance(metadata, dict)
                else {},
            }
            if kind == "execute_result":
                count = raw.get("execution_count")
                output["execution_count"] = count if isinstance(count, int) else None
            return output
    return None


def plain_text(output: Mapping[str, Any]) -> str:
    """What an output says as text: a stream's text, a result's ``text/plain``, an error's
    traceback (ANSI colours removed)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text")) or ""
    if kind == "error":
        traceback = output.get("traceback")
        lines = traceback if isinstance(traceback, list) else []
        return strip_ansi("\n".join(str(line) for line in lines))
    data = output.get("data")
    return (_text(data.get("text/plain")) or "") if isinstance(data, Mapping) else ""


def comparable(outputs: Iterable[Mapping[str, Any]]) -> str:
    """Outputs reduced to what a re-run should reproduce: stream text (consecutive chunks of
    one stream joined), results' and displays' ``text/plain``, error names and values.
    Colours, carriage-return progress, trailing blanks and memory addresses are normalized;
    execution counts and images are ignored."""
    parts: list[tuple[str, str]] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            tag = str(output.get("name"))
            if parts and parts[-1][0] == tag:
                parts[-1] = (tag, parts[-1][1] + plain_text(output))
                continue
            parts.append((tag, plain_text(output)))
        elif kind == "error":
            parts.append(("error", f"{output.get('ename')}: {output.get('evalue')}"))
        elif kind == "execute_result":
            parts.append(("result", plain_text(output)))
        elif kind == "display_data":
            parts.append(("display", plain_text(output)))
    return "\n".join(f"[{tag}]\n{_normalized(text)}" for tag, text in parts)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _normalized(text: str) -> str:
    lines = strip_ansi(text).replace("\r\n", "\n").split("\n")
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in lines]
    return _ADDRESS.sub("0x…", "\n".join(lines).strip("\n"))


def _bundle(data: object) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    bundle: dict[str, Any] = {}
    for mime, value in data.items():
        if mime not in KEPT_MIME_TYPES:
            continue
        if mime == "application/json":
            if isinstance(value, dict | list):
                bundle[mime] = value
            continue
        text = _text(value)
        if text is None:
            continue
        if mime == "text/html":
            text = sanitize_html(text)
        elif mime == "text/markdown":
            text = sanitize_markdown(text)
        elif mime == "text/latex":
            text = sanitize_latex(text)
        bundle[mime] = text
    return bundle


def _text(value: object) -> str | None:
    """nbformat's multiline string: a string or a list of strings."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return "".join(value)
    return None
