"""The per-cell pipeline of ``%%agent``: options, model choice, session choice, the plan,
the approver and the run. It reads the kernel state and the view below it and never imports
the entry points or the ``%agent`` commands above it (docs/architecture.md, "Layers")."""
