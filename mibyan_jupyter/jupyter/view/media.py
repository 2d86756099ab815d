"""Images a tool produced, as ``data:`` URLs that are safe to put in an ``<img src>``.

Tool output is untrusted, so an image is only shown when its base64 text decodes strictly
and the bytes start with the PNG signature: nothing but a PNG can then reach the page, and a
crafted "image" (``"x" onerror=...``, a ``javascript:`` URL, an SVG with script) is dropped.
Sources: the nbformat outputs a ``run_python`` call recorded in ``details["outputs"]`` and
the ``data:image/png`` parts of the result's content.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable

from mibyan_jupyter.core.messages import ImagePart, ToolMessage

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_IMAGES = 8
MAX_BASE64_CHARS = 4_000_000
"""About 3 MB of PNG: a plot is ~50 KB; anything far larger is not worth a live message."""

_PREFIX = "data:image/png;base64,"
_WHITESPACE = re.compile(r"\s+")


def png_data_url(value: object) -> str | None:
    """A ``data:image/png;base64,`` URL for ``value`` (base64 text, or nbformat's list of
    lines), or ``None`` when it is not a valid PNG."""
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        value = "".join(value)
    if not isinstance(value, str):
        return None
    text = _WHITESPACE.sub("", value)
    if not text or len(text) > MAX_BASE64_CHARS:
        return None
    try:
        head = base64.b64decode(text[:12], validate=True)
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _PREFIX + text if head.startswith(PNG_SIGNATURE) else None


def tool_images(result: ToolMessage) -> list[str]:
    """The PNG images of a tool result, in order, without duplicates, at most MAX_IMAGES."""
    found: list[str] = []
    for candidate in _candidates(result):
        url = png_data_url(candidate)
        if url is not None and url not in found:
            found.append(url)
            if len(found) == MAX_IMAGES:
                break
    return found


def _candidates(result: ToolMessage) -> Iterable[object]:
    outputs = (result.details or {}).get("outputs")
    if isinstance(outputs, list):
        for output in outputs:
            if not isinstance(output, dict):
                continue
            if output.get("output_type") not in ("display_data", "execute_result"):
                continue
            data = output.get("data")
            if isinstance(data, dict) and "image/png" in data:
                yield data["image/png"]
    if not isinstance(result.content, str):
        for part in result.content:
            if isinstance(part, ImagePart) and part.image_url.url.startswith(_PREFIX):
                yield part.image_url.url[len(_PREFIX) :]
