"""Tools from MCP servers (docs/architecture.md, "Tools from outside").

The ``mcp`` SDK is an optional extra (``pip install mibyan-jupyter[mcp]``): this package
imports it only when a configured server is started, so ``%load_ext`` never does.
"""
