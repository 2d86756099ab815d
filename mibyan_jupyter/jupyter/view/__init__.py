"""The live view of a ``%%agent`` cell.

The cell's run creates an :class:`AgentView`, displays it, subscribes it to the agent and
calls :meth:`AgentView.finish` when the run ends, which puts the static transcript in its
place. That transcript (also shown for a stored history, ``%agent resume``) is rendered by
the export layer: :func:`mibyan_jupyter.export.transcript.render_transcript`. The ops the
view sends are typed once in :mod:`.ops` and mirrored for the front end in
``static/ops.d.ts``.
"""

from mibyan_jupyter.jupyter.view.header import ViewHeader
from mibyan_jupyter.jupyter.view.live import AgentView

__all__ = ["AgentView", "ViewHeader"]
