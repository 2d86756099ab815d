"""The session store: every session durable in SQLite, resumable, searchable, forkable.

Start with :class:`SessionStore` (the default database lives in the Jupyter data dir;
``MIBYAN_DB`` overrides it) and the helpers of :mod:`.session_api`. Importing this package
loads ``sqlite3`` only; the top-level package does not import it.
"""

from mibyan_jupyter.store.approval_rules import ApprovalRules
from mibyan_jupyter.store.db import Database, StoreError, default_path
from mibyan_jupyter.store.lease import Holder, Lease, LeaseKeeper, LeaseLost
from mibyan_jupyter.store.liveness import LeaseLiveness, Liveness, Owner, ProcessLiveness
from mibyan_jupyter.store.resume import PendingApproval, pending_approvals, repair, resume_agent
from mibyan_jupyter.store.search import SearchHit, search
from mibyan_jupyter.store.session_api import approval_policy, attach, recorded_agent, resume
from mibyan_jupyter.store.sessions import (
    AmbiguousSessionError,
    SessionInfo,
    SessionNotFoundError,
    SessionStore,
)
from mibyan_jupyter.store.writer import StoreWriter

__all__ = [
    "AmbiguousSessionError",
    "ApprovalRules",
    "Database",
    "Holder",
    "Lease",
    "LeaseKeeper",
    "LeaseLiveness",
    "LeaseLost",
    "Liveness",
    "Owner",
    "PendingApproval",
    "ProcessLiveness",
    "SearchHit",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "StoreError",
    "StoreWriter",
    "approval_policy",
    "attach",
    "default_path",
    "pending_approvals",
    "recorded_agent",
    "repair",
    "resume",
    "resume_agent",
    "search",
]
