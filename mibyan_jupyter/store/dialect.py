"""Where the store's SQL differs between SQLite and PostgreSQL, named in one place.

Most of the store's SQL is the same on both (the PostgreSQL migrations keep SQLite's
tables, columns and types: text, integer, double precision; ``?`` placeholders are
translated by :mod:`.pg.conn`; ``INSERT ... ON CONFLICT`` is spelled the same). What is
left is here, as small fragments a module asks for, so a reader sees every difference at
once and no module tests the type of its connection (docs/architecture.md, "The team
store (PostgreSQL)").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Dialect:
    name: Literal["sqlite", "postgresql"]
    lock_row: str
    """Appended to a ``SELECT`` of the row a transaction is about to change: nothing on
    SQLite (``BEGIN IMMEDIATE`` already holds the file's one write lock), ``FOR UPDATE``
    on PostgreSQL (two kernels' transactions run at once; the row lock orders them)."""
    position: str
    """``position(needle, haystack)``: where a text occurs (1-based), 0 when it does not,
    as ``{needle}``/``{haystack}`` format fields."""
    as_bytes: str
    """A text column read as its UTF-8 bytes, as a ``{}`` format field (pydantic parses
    bytes a little faster, and a row-by-row repair reads bytes)."""
    load_all: str
    """One row: the ``data`` of a session's messages as one JSON array (UTF-8 bytes), in
    ``seq`` order, and how many there are; ``{where}`` picks the rows (store/loading.py)."""
    rule_key: str
    """The columns of ``approval_rules``' primary key, for its upsert's ``ON CONFLICT``:
    the tool on SQLite (one user's file), the user and the tool on PostgreSQL (every
    user's rules in one table, migration 0006; store/approval_rules.py)."""

    @property
    def is_postgres(self) -> bool:
        return self.name == "postgresql"

    def contains(self, haystack: str, needle: str) -> str:
        """The condition that ``needle`` occurs in ``haystack`` (both SQL expressions)."""
        return "(" + self.position.format(haystack=haystack, needle=needle) + " > 0)"


SQLITE = Dialect(
    name="sqlite",
    lock_row="",
    position="instr({haystack}, {needle})",
    as_bytes="CAST({} AS BLOB)",
    load_all=(
        "SELECT CAST('[' || group_concat(data, ',') || ']' AS BLOB), count(*) FROM"
        " (SELECT data FROM messages WHERE {where} ORDER BY seq)"
    ),
    rule_key="tool",
)
POSTGRES = Dialect(
    name="postgresql",
    lock_row=" FOR UPDATE",
    position="strpos({haystack}, {needle})",
    as_bytes="convert_to({}, 'UTF8')",
    load_all=(
        "SELECT convert_to('[' || string_agg(data, ',' ORDER BY seq) || ']', 'UTF8'), count(*)"
        " FROM messages WHERE {where}"
    ),
    rule_key="user_name, tool",
)
