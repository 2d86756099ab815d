"""The PostgreSQL tests' fixtures are tests/pg_server.py's (loaded by the root conftest),
shared with the store suite's ``postgresql`` backend."""

from __future__ import annotations

import os

try:
    import psycopg  # noqa: F401
except ImportError:  # the postgres extra is not installed
    if os.environ.get("MIBYAN_NO_SKIP") == "1":
        raise
    collect_ignore_glob = ["test_*.py"]
