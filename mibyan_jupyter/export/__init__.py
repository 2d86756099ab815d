"""Export a session: an nbformat v4 notebook (optionally re-run to check it) or Markdown.

Exports work on a plain transcript plus a :class:`SessionMeta`, so they do not depend on
the store. Every export redacts known secrets (``providers.credentials.REDACT``) and
sanitizes Markdown, since model output is untrusted. Importing this package is light:
nbformat, nbclient and nh3 are imported on first use.
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
