"""Export a session: an nbformat v4 notebook (optionally re-run to check it) or Markdown,
and the static transcript a ``%%agent`` cell keeps (:mod:`.transcript`, shown at a run's end
and by ``%agent resume``): three layouts of the same blocks (:mod:`.render`).

Exports work on a plain transcript plus a :class:`SessionMeta`, so they do not depend on
the store. Every export redacts known secrets (``mibyan_jupyter.secrets.REDACT``) and
sanitizes Markdown, since model output is untrusted. Importing this package is light:
nbformat, nbclient, nh3 and mistune are imported on first use.
"""

from mibyan_jupyter.export.markdown import export_markdown
from mibyan_jupyter.export.notebook import (
    Difference,
    export_notebook,
    verify_notebook,
    write_notebook,
)
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.sanitize import sanitize_markdown

__all__ = [
    "Difference",
    "SessionMeta",
    "export_markdown",
    "export_notebook",
    "sanitize_markdown",
    "verify_notebook",
    "write_notebook",
]
