"""The Jupyter layer: the ``%%agent`` magic, its live view and the tools it gives the model.

Its rooms point one way (docs/architecture.md, "Layers"): ``entry/`` (what IPython and the
front end call) over ``commands/`` (``%agent``) over ``cell/`` (the per-cell pipeline) over
``state.py`` / ``defaults.py``, ``view/`` and ``kernel_tools/``.
"""
