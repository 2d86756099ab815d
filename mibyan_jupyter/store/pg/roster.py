"""The team store's course roster, made equal to the admin policy's ``[courses]``.

Why the policy is the source: the admin writes courses, instructors and students once, in
the root-owned policy file the kernels already obey (docs/architecture.md, "Admin policy"),
and row-level security reads the roster in the database (``course_members``) to decide
which instructor may read whose sessions (docs/architecture.md, "The team store
(PostgreSQL)"). ``mibyan-admin pg sync-roster`` copies the one into the other, so the two
never disagree about who teaches whom. A course the policy names gets exactly the members
it lists (one listed as both is an instructor); a course it does not name is left as it is
and said so (``add-user --course`` may have made it). Names without a login role are
listed: the roster row is kept (it grants nothing until the role exists), and ``pg
add-user NAME`` makes the role.

Runs in one transaction on an admin's connection; ``dry_run`` rolls it back after
counting, so the lines say what a real run would change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mibyan_jupyter.store.pg.schema import SCHEMA

Roster = Mapping[str, tuple[Sequence[str], Sequence[str]]]
"""Course name -> (instructors, students), as the policy lists them."""


def wanted_members(instructors: Sequence[str], students: Sequence[str]) -> dict[str, str]:
    """Each member's role in one course; a name listed as both is an instructor."""
    members = dict.fromkeys(students, "student")
    members.update(dict.fromkeys(instructors, "instructor"))
    return members


def sync_roster(conn: Any, roster: Roster, *, dry_run: bool = False) -> list[str]:
    """Make ``course_members`` equal to ``roster`` for every course it names; one line per
    course, then one for courses left alone and one for names without a login role."""
    import psycopg

    lines: list[str] = []
    with conn.transaction():
        for course in sorted(roster):
            lines.append(_sync_course(conn, course, wanted_members(*roster[course])))
        lines += _left_alone(conn, roster) + _without_role(conn, roster)
        if dry_run:
            raise psycopg.Rollback()  # the transaction block rolls back and swallows it
    if dry_run:
        lines = [f"(dry run, nothing changed) {line}" for line in lines]
    return lines


def _sync_course(conn: Any, course: str, wanted: dict[str, str]) -> str:
    conn.execute(
        f"INSERT INTO {SCHEMA}.courses (name) VALUES (%s) ON CONFLICT DO NOTHING", (course,)
    )
    rows = conn.execute(
        f"SELECT user_name, role FROM {SCHEMA}.course_members WHERE course = %s", (course,)
    ).fetchall()
    have = {str(name): str(role) for name, role in rows}
    gone = sorted(name for name in have if name not in wanted)
    changed = sorted(name for name, role in wanted.items() if have.get(name) != role)
    if gone:
        conn.execute(
            f"DELETE FROM {SCHEMA}.course_members WHERE course = %s AND user_name = ANY(%s)",
            (course, gone),
        )
    for name in changed:
        conn.execute(
            f"INSERT INTO {SCHEMA}.course_members (course, user_name, role) VALUES (%s, %s, %s)"
            " ON CONFLICT (course, user_name) DO UPDATE SET role = excluded.role",
            (course, name, wanted[name]),
        )
    teachers = sum(1 for role in wanted.values() if role == "instructor")
    return (
        f"course {course}: {teachers} instructor(s), {len(wanted) - teachers} student(s);"
        f" {len(changed)} added or changed, {len(gone)} removed"
    )


def _left_alone(conn: Any, roster: Roster) -> list[str]:
    rows = conn.execute(f"SELECT name FROM {SCHEMA}.courses ORDER BY name").fetchall()
    others = [str(name) for (name,) in rows if name not in roster]
    if not others:
        return []
    return [f"not in the policy, left as they are: {', '.join(others)}"]


def _without_role(conn: Any, roster: Roster) -> list[str]:
    names = sorted({name for course in roster.values() for group in course for name in group})
    if not names:
        return []
    rows = conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (names,))
    missing = sorted(set(names) - {str(name) for (name,) in rows})
    if not missing:
        return []
    return [
        f"no login role yet for: {', '.join(missing)} (mibyan-admin pg add-user NAME makes one)"
    ]
