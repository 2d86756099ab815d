"""The live view of a ``%%agent`` cell and the static transcript that replaces it.

``run.py`` creates an :class:`AgentView`, displays it, subscribes it to the agent and calls
:meth:`AgentView.finish` when the run ends; :func:`render_transcript` also shows a stored
history (``%agent resume``) with no kernel round trip.
"""

from mibyan_jupyter.jupyter.view.header import ViewHeader
from mibyan_jupyter.jupyter.view.live import AgentView
from mibyan_jupyter.jupyter.view.transcript import render_transcript

__all__ = ["AgentView", "ViewHeader", "render_transcript"]
