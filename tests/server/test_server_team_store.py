"""The sessions API on the PostgreSQL team store: a real jupyter server whose environment
names the team store (``MIBYAN_DB_URL``, the hub user's login role; its password in the
session's PGPASSFILE) lists that role's own sessions, and ``scope=course`` lists what
row-level security lets the role read of others': an instructor's students', never another
course's; a student gets none; SQLite refuses it (docs/architecture.md, "Admin policy",
"The team store (PostgreSQL)")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from pg_server import PgTestDb

from mibyan_jupyter.server.shapes import CourseListJSON, SessionListJSON
from mibyan_jupyter.store import SessionStore

from .api_server import ApiServer
from .conftest import add_session, error, shaped

pytestmark = pytest.mark.slow


@contextmanager
def server_for(base: Path, url: str | None) -> Iterator[httpx.Client]:
    server = ApiServer(base)
    if url is not None:
        server.env["MIBYAN_DB_URL"] = url
    server.env["JUPYTERHUB_USER"] = "not-the-role"  # the login role decides, not this
    server.start()
    try:
        with server.client() as client:
            yield client
    finally:
        server.stop()


def session_of(pg_db: PgTestDb, name: str, title: str) -> str:
    with SessionStore(pg_db.url(name)) as store:
        return add_session(store, title)


def test_the_panel_lists_own_sessions_and_an_instructors_students(
    pg_db: PgTestDb, tmp_path: Path
) -> None:
    ivy = pg_db.user("ivy", course="cs1", role="instructor")
    ada = pg_db.user("ada", course="cs1")
    cat = pg_db.user("cat", course="art")
    mine = session_of(pg_db, ivy.name, "ivy's notes")
    adas = session_of(pg_db, ada.name, "ada's homework")
    session_of(pg_db, cat.name, "cat's sketch")
    with server_for(tmp_path / "ivy", pg_db.url(ivy.name)) as api:
        own = shaped(SessionListJSON, api.get("/sessions").json())
        assert [s["id"] for s in own["sessions"]] == [mine]
        assert own["total"] == 1
        course = api.get("/sessions", params={"scope": "course"})
        assert course.status_code == 200, course.text
        listed = shaped(CourseListJSON, course.json())
        assert [s["id"] for s in listed["sessions"]] == [adas]
        assert listed["owners"] == {adas: ada.name}
        assert listed["instructs"] is True  # the panel's Course view is offered
        assert listed["total"] == 1
        assert "cat's sketch" not in course.text
        assert ivy.password not in course.text
    with server_for(tmp_path / "ada", pg_db.url(ada.name)) as api:
        own = shaped(SessionListJSON, api.get("/sessions").json())
        assert [s["id"] for s in own["sessions"]] == [adas]
        none = shaped(CourseListJSON, api.get("/sessions?scope=course").json())
        assert none == {"sessions": [], "total": 0, "owners": {}, "instructs": False}
        error(api.get(f"/sessions/{mine}"), 404, "not_found")


def test_scope_course_on_sqlite_is_one_line(tmp_path: Path) -> None:
    with server_for(tmp_path, None) as api:
        said = error(api.get("/sessions?scope=course"), 400, "bad_request")
        assert "team store" in said


def test_a_team_store_that_refuses_is_one_store_line(pg_db: PgTestDb, tmp_path: Path) -> None:
    """A role the server does not know: the request fails with one line naming the team
    store and the role (no traceback, no password), and the server keeps serving."""
    with server_for(tmp_path, pg_db.url("nobody_here")) as api:
        said = error(api.get("/sessions"), 500, "store")
        assert "the team store" in said
        assert "nobody_here" in said
        error(api.get("/sessions"), 500, "store")  # tried again, the same line


def test_an_instructor_whose_students_wrote_nothing_yet_is_told_so(
    pg_db: PgTestDb, tmp_path: Path
) -> None:
    """``instructs`` comes from the roster, not from the sessions found: an instructor is
    offered the Course view (empty) before any student of theirs ran the agent."""
    una = pg_db.user("una", course="cs2", role="instructor")
    pg_db.user("bob", course="cs2")
    with server_for(tmp_path, pg_db.url(una.name)) as api:
        listed = shaped(CourseListJSON, api.get("/sessions?scope=course").json())
        assert listed == {"sessions": [], "total": 0, "owners": {}, "instructs": True}
