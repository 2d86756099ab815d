"""Passwords out of every text the team store shows: an error line, a pool's log record.

Why a module of its own: both the connection (store/pg/connect.py) and the statements'
failure lines (store/pg/conn.py) scrub what libpq and psycopg say, and neither may depend on
the other for it (docs/architecture.md, "The team store (PostgreSQL)").
"""

from __future__ import annotations

import os
import re

_SECRET_PATTERNS = (
    re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE),
    re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)", re.IGNORECASE),
    re.compile(r"([?&]password=)([^&\s]*)", re.IGNORECASE),
)


def scrub(text: str) -> str:
    """``text`` with every password in it replaced by ``***``: ``password=`` pairs, the
    password part of a URL, and the value of ``PGPASSWORD`` wherever it appears."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m[1] + "***" + (m[3] if m.lastindex == 3 else ""), text)
    secret = os.environ.get("PGPASSWORD")
    if secret:
        text = text.replace(secret, "***")
    return text
