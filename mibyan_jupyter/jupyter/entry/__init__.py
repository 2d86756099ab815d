"""What IPython and the front end call: ``%load_ext``, the magics, the input transformer
and the queue comm. The top of the Jupyter layer: it may import everything below, nothing
imports it (docs/architecture.md, "Layers"). Import it lightly: ``%load_ext``
must not load the core, pydantic, httpx or the store."""
