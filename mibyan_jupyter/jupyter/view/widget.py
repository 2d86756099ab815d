"""The live view's widget: an anywidget whose front end is ``static/view.js``.

It has no synced state of its own besides the module and its CSS: everything it shows
arrives as batches of ops in custom messages (see :mod:`.outbox`), and the front end sends
back "rendered", "decision" and "stop" messages (both directions typed in :mod:`.ops`).
Plain ES module and CSS files, shipped as they are (hatchling puts them in the package): the
extension build only type-checks ``view.js`` against ``static/ops.d.ts``, it bundles nothing.
"""

from __future__ import annotations

import pathlib

import anywidget

STATIC = pathlib.Path(__file__).parent / "static"


class AgentWidget(anywidget.AnyWidget):
    _esm = STATIC / "view.js"
    _css = STATIC / "view.css"
