"""``%agent review``: a course's instructors read how their students used the agent.

Who may: the instructors the admin policy's roster names, for the students of their own
courses, and only when the policy makes conversations reviewable (students are told so on
every cell's view). On SQLite this reads what the kernel's database file holds (a shared
course database, best effort) and the roster is the policy file's; on the PostgreSQL team
store the roster is the database's (``course_members``) and row-level security lets an
instructor's login role read exactly their students' rows, so a roster in the kernel's
environment cannot widen it (docs/architecture.md, "Admin policy", "Instructor review").

``--export DIR`` writes one student's sessions as Markdown (or notebooks) with an index,
an "AI use appendix" a grader can read beside the work; it reuses ``%agent export``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.common import cost, count, parser, short, when
from mibyan_jupyter.jupyter.commands.tables import Message, Table
from mibyan_jupyter.jupyter.state import kernel_state
from mibyan_jupyter.policy.files import load_policy
from mibyan_jupyter.policy.model import AdminPolicy
from mibyan_jupyter.store import audit
from mibyan_jupyter.store.conn import StoreDatabase
from mibyan_jupyter.store.scope import EVERYONE
from mibyan_jupyter.store.usage import ReviewRow, review_rows


def _policy() -> AdminPolicy:
    loaded = load_policy()
    if loaded.problems:
        raise AgentUsageError(f"review is off: {loaded.problems[0]}")
    if loaded.policy is None:
        raise AgentUsageError("review needs an admin policy with a roster (none is installed)")
    if not loaded.policy.review.reviewable:
        raise AgentUsageError("the admin policy does not make conversations reviewable")
    return loaded.policy


def students_of(policy: AdminPolicy, me: str, course: str | None, user: str | None) -> list[str]:
    """The students ``me`` may review by the policy file's roster (SQLite)."""
    mine = {
        name: set(policy.courses[name].students) for name in policy.courses_of(me, "instructors")
    }
    return pick_students(mine, me, course, user)


def roster_of(db: StoreDatabase, me: str) -> dict[str, set[str]]:
    """The team store's roster as ``me`` may read it: each course ``me`` teaches and its
    students (``course_members``, synced from the policy by ``mibyan-admin pg
    sync-roster``; row-level security shows a user their own rows and their students')."""
    found = db.conn.execute(
        "SELECT i.course, s.user_name FROM course_members i LEFT JOIN course_members s"
        " ON s.course = i.course AND s.role = 'student'"
        " WHERE i.user_name = ? AND i.role = 'instructor'",
        (me,),
    )
    mine: dict[str, set[str]] = {}
    for course, student in found:
        mine.setdefault(course, set()).update([student] if student else [])
    return mine


def pick_students(
    mine: dict[str, set[str]], me: str, course: str | None, user: str | None
) -> list[str]:
    """The students of ``mine`` (course -> students ``me`` teaches) to review: of
    ``course``, or of all; ``user`` alone when given; or one usage line saying why not."""
    if not mine:
        raise AgentUsageError(
            f"only a course's instructors can review, and the roster names {me} in none"
        )
    if course is not None and course not in mine:
        yours = ", ".join(sorted(mine))
        raise AgentUsageError(f"you are not an instructor of {course!r} (yours: {yours})")
    courses = [course] if course is not None else sorted(mine)
    students = sorted({s for name in courses for s in mine[name]})
    if user is not None:
        if user not in students:
            raise AgentUsageError(f"{user} is not a student of {', '.join(courses)}")
        return [user]
    return students


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise AgentUsageError(f"--since must be a date like 2026-03-01; got {text!r}") from None


def review(words: list[str]) -> Table | Message:
    args = parser(
        "review",
        (("--course",), {}),
        (("--user",), {}),
        (("--since",), {}),
        (("--search",), {}),
        (("--audit",), {"action": "store_true"}),
        (("--export",), {}),
        (("--format",), {"choices": ("md", "ipynb"), "default": "md"}),
        (("--limit",), {"default": "200"}),
    ).parse_args(words)
    policy, store = _policy(), kernel_state().store()
    if store.db.dialect.is_postgres:  # the database's roster, for the login role
        students = pick_students(
            roster_of(store.db, store.db.user), store.db.user, args.course, args.user
        )
    else:
        students = students_of(policy, audit.current_user(), args.course, args.user)
    since, limit = _since(args.since), count("--limit", args.limit)
    if args.audit:
        found = audit.rows(store.db.conn, users=students, since=since, limit=limit)
        listed = [
            (when(r.at), r.user_name, r.kind, short(r.session_id or ""), _detail(r.detail))
            for r in found
        ]
        return Table(("at", "user", "kind", "session", "detail"), listed, caption="Audit trail")
    rows = review_rows(store.db, students, since=since, search=args.search, limit=limit)
    if args.export is not None:
        if args.user is None:
            raise AgentUsageError("--export writes one student's sessions: give --user too")
        return _export(rows, Path(args.export).expanduser(), args.user, args.format)
    table = [_row(r) for r in rows]
    headers = ("user", "session", "title", "model", "messages", "tokens", "cost", "updated")
    spent = sum(r.cost or 0.0 for r in rows)
    return Table(
        headers,
        table,
        caption=f"Sessions of {len(students)} student(s)",
        note=f"total ${spent:.4f}",
    )


def _row(r: ReviewRow) -> tuple[object, ...]:
    """One table row: who, which session, what it used and when."""
    used = (r.messages, r.tokens, cost(r.cost), when(r.updated_at))
    return (r.user_name, short(r.session_id), r.title, r.model or "", *used)


def _detail(detail: dict[str, object]) -> str:
    line = detail.get("line")
    if isinstance(line, str):
        return line
    return ", ".join(f"{k}={v}" for k, v in detail.items() if k != "call_id" and v is not None)


def _export(rows: list[ReviewRow], folder: Path, user: str, fmt: str) -> Message:
    """One file per session and an index (the appendix) in ``folder``."""
    from mibyan_jupyter.jupyter.commands.history import export_session

    folder.mkdir(parents=True, exist_ok=True)
    store = kernel_state().store()
    index = [f"# AI use appendix: {user}", "", f"Exported {time.strftime('%Y-%m-%d %H:%M')}.", ""]
    index += ["| session | title | model | messages | cost | updated | file |", "|---" * 7 + "|"]
    for r in rows:
        name = f"{user}-{short(r.session_id)}.{fmt}"
        info = store.get(r.session_id, scope=EVERYONE)  # the roster said yes (above)
        export_session(store, info, str(folder / name), fmt, False, force=True)
        title = r.title.replace("|", "\\|")
        index.append(
            f"| {short(r.session_id)} | {title} | {r.model or ''} | {r.messages} | "
            f"{cost(r.cost)} | {when(r.updated_at)} | [{name}]({name}) |"
        )
    (folder / f"{user}-appendix.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return Message(f"Wrote {len(rows)} session(s) of {user} and {user}-appendix.md to {folder}.")
