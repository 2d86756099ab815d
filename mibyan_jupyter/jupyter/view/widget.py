"""The live view's widget: an anywidget whose front end is ``static/view.js``.

It has no synced state of its own besides the module and its CSS: everything it shows
arrives as batches of ops in custom messages (see :mod:`.outbox`), and the front end sends
back "rendered", "decision" and "stop" messages. Plain ES module and CSS files, no build
step; hatchling ships them inside the package.
"""

from __future__ import annotations

import pathlib

import anywidget

STATIC = pathlib.Path(__file__).parent / "static"


class AgentWidget(anywidget.AnyWidget):
    _esm = STATIC / "view.js"
    _css = STATIC / "view.css"
