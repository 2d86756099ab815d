"""The jupyter_server extension: the sessions REST API under ``/mibyan/api/``.

Enabled by ``jupyter-config/jupyter_server_config.d/mibyan_jupyter.json``, which the wheel
installs into ``etc/jupyter/jupyter_server_config.d/``. It serves the same session store
the kernels write (``c.MibyanServer.db_path``, else ``MIBYAN_DB``, else the default), so
the lab extension's sessions panel can list, search, export, fork, rename and delete
sessions without a kernel (docs/architecture.md, "The sessions API"). Nothing in the
package imports this one: ``%load_ext mibyan_jupyter`` never loads it.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Where jupyter_server finds the extension (this module)."""
    return [{"module": "mibyan_jupyter.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the API's routes to the server (called once by jupyter_server)."""
    from mibyan_jupyter.server.extension import load

    load(serverapp)
