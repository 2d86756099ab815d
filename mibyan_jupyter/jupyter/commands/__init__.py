"""``%agent <command>``: the session commands (sessions, resume, fork, export, delete) and
the control commands (stop, status, policy, config, models), dispatched by :mod:`.dispatch`.
Commands read the kernel state and may use the cell pipeline; they never import the entry
points (docs/architecture.md, "Layers")."""
