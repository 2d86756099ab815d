"""The admin policy: a root-owned file that wins over every setting an honest user has.

Layer: beside the cell pipeline (it reads a cell's plan and the kernel's store); it imports
the store, core and jupyter_core, never the commands or the entry points. The pure parts
(:mod:`.model`) import pydantic only. See docs/architecture.md, "Admin policy", for the
threat model: inside the kernel this is a convenience for honest users, and the hard
guarantees are PostgreSQL's row-level security and a spending proxy.
"""

from mibyan_jupyter.policy.files import ENV_POLICY, LoadedPolicy, load_policy, system_paths
from mibyan_jupyter.policy.model import AdminPolicy

__all__ = ["ENV_POLICY", "AdminPolicy", "LoadedPolicy", "load_policy", "system_paths"]
