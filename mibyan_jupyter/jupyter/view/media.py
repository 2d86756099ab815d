"""The images of a tool result for its live card, each validated as a PNG.

Sources: the nbformat outputs a ``run_python`` call recorded in ``details["outputs"]`` and
the ``data:image/png`` parts of the result's content. Validation is the export layer's
(:func:`mibyan_jupyter.export.media.png_data_url`), the same the static transcript uses.
"""

from __future__ import annotations

from collections.abc import Iterable

from mibyan_jupyter.core.messages import ImagePart, ToolMessage
from mibyan_jupyter.export.media import MAX_IMAGES, PNG_PREFIX, png_data_url


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
            if isinstance(part, ImagePart) and part.image_url.url.startswith(PNG_PREFIX):
                yield part.image_url.url[len(PNG_PREFIX) :]
