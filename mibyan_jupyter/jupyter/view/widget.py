"""The live view's widget: an anywidget whose front end is ``static/view.js``.

It has no synced state of its own besides the module and its CSS: everything it shows
arrives as batches of ops in custom messages (see :mod:`.outbox`), and the front end sends
back "rendered", "decision" and "stop" messages (both directions typed in :mod:`.ops`).
Plain JavaScript and CSS files, shipped as they are (hatchling puts them in the package):
anywidget loads one ES module, so the plain scripts that build the page (:data:`FRONT_END`:
``dom.js``, ``markdown.js``, the cards, the footer) are joined before ``view.js``, which holds
the wire and ``render``. The extension build type-checks them together against
``static/ops.d.ts``; nothing is bundled.
"""

from __future__ import annotations

import pathlib

import anywidget

STATIC = pathlib.Path(__file__).parent / "static"


FRONT_END = (
    "dom.js",
    "markdown.js",
    "cards.js",
    "toolcards.js",
    "footer.js",
    "children.js",
    "view.js",
)
"""The front end's files in the order they are joined (the last is the module's face)."""

STYLES = ("view.css", "markdown.css", "cards.css")
"""The style sheets, joined in this order into the widget's one ``_css``."""


def front_end_module() -> str:
    """The one ES module anywidget loads: the plain scripts, then ``view.js``."""
    return "\n".join((STATIC / name).read_text(encoding="utf-8") for name in FRONT_END)


class AgentWidget(anywidget.AnyWidget):
    _esm = front_end_module()
    _css = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in STYLES)
