"""Images from tool output as ``data:`` URLs that are safe to put in an ``<img src>``.

Tool output is untrusted, so an image is only shown when its base64 text decodes strictly
and the bytes start with the PNG signature: nothing but a PNG can then reach the page, and a
crafted "image" (``"x" onerror=...``, a ``javascript:`` URL, an SVG with script) is dropped.
The static transcript (:mod:`.transcript`) and the live view's tool cards both show images
only through :func:`png_data_url`.
"""

from __future__ import annotations

import base64
import binascii
import re

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_PREFIX = "data:image/png;base64,"
MAX_IMAGES = 8
"""Images of one tool result shown on a live card (the transcript's Markdown keeps four
times as many outputs)."""
MAX_BASE64_CHARS = 4_000_000
"""About 3 MB of PNG: a plot is ~50 KB; anything far larger is not worth a live message."""

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
    return PNG_PREFIX + text if head.startswith(PNG_SIGNATURE) else None
