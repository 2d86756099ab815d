"""The sessions panel's Course view: an instructor on the team store reads their students'
sessions, read-only; on SQLite (or for a student) the "My sessions" / "Course" switch is not
there (docs/architecture.md, "Admin policy", "The team store (PostgreSQL)").

The team-store test runs a JupyterLab of this module's own whose environment names a real
PostgreSQL database (``MIBYAN_DB_URL``, the instructor's login role; the password is in the
session's PGPASSFILE, as a hub would set up), with an instructor and two students of one
course and a student of another, each of whose sessions was written through
``SessionStore(url)`` as that student's own role: row-level security, not the panel, decides
who is listed. The SQLite test uses the shared JupyterLab (its store is a SQLite file).
"""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pg_server import PgTestDb, fresh_database

from mibyan_jupyter.core.messages import UserMessage
from mibyan_jupyter.store.records import append_message
from mibyan_jupyter.store.sessions import SessionStore

from .lab_artifacts import Artifacts, artifact_name
from .lab_driver import Lab, LabServer, text
from .lab_process import BUILT_LABEXTENSION

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from mibyan_jupyter.testing.pg_cluster import PgCluster

pytestmark = pytest.mark.browser

ITEM = ".mibyan-sp .mibyan-sp-item"
STATUS = ".mibyan-sp-status"
TITLE_WITH_MARKUP = "ada's <img src=x onerror=window.__pwned=1> homework"


@dataclass
class Course:
    """The team store's people and the title of each one's session."""

    server: LabServer
    names: dict[str, str]
    """``ivy`` (the instructor), ``ada`` / ``bob`` (her students), ``cat`` (another
    course's student) -> their login role."""
    titles: dict[str, str]


def write_session(db: PgTestDb, role: str, title: str) -> None:
    with SessionStore(db.url(role)) as store:
        info = store.create(title, model="demo", notebook_path="hw/week1.ipynb")
        append_message(store.db, info.id, UserMessage(content=f"{title}: help me"))


@pytest.fixture(scope="module")
def course(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Course]:
    """A JupyterLab serving the team store as the instructor ``ivy``."""
    with fresh_database(pg_cluster) as db:
        names = {
            "ivy": db.user("ivy", course="cs1", role="instructor").name,
            "ada": db.user("ada", course="cs1").name,
            "bob": db.user("bob", course="cs1").name,
            "cat": db.user("cat", course="art").name,
        }
        titles = {
            "ivy": "ivy's lecture notes",
            "ada": TITLE_WITH_MARKUP,
            "bob": "bob's lab report",
            "cat": "cat's sketchbook",
        }
        for person, title in titles.items():
            write_session(db, names[person], title)
        # Made after pg_cluster set PGPASSFILE: the server's environment carries it.
        server = LabServer(
            tmp_path_factory.mktemp("jupyterlab-course"), labextension=BUILT_LABEXTENSION
        )
        server.env["MIBYAN_DB_URL"] = db.url(names["ivy"])
        server.start()
        try:
            yield Course(server, names, titles)
        finally:
            server.stop()


@pytest.fixture
def page(request: pytest.FixtureRequest, course: Course, chromium: Browser) -> Iterator[Page]:
    """A fresh page of the team-store JupyterLab, its panel open; screenshot and logs saved
    to artifacts/<test>/ after the test, as the shared ``lab`` fixture does."""
    artifacts = Artifacts(artifact_name(f"{Path(request.node.path).stem}.{request.node.name}"))
    log_start = course.server.log_size()
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    artifacts.listen(page)
    try:
        page.goto(f"{course.server.url}/lab?reset&token={course.server.token}")
        open_panel(page)
        yield page
        assert artifacts.page_errors == []
    finally:
        artifacts.save(page, course.server.log_since(log_start))
        context.close()


def open_panel(page: Page) -> None:
    """Open the panel once JupyterLab restored its layout (which would hide it again)."""
    page.wait_for_function("() => !!window.jupyterapp?.restored")
    page.evaluate(
        "async () => { await window.jupyterapp.restored;"
        " await window.jupyterapp.commands.execute('mibyan:open-sessions-panel'); }"
    )
    page.locator(".mibyan-sp").wait_for(state="visible")


def wait_status(page: Page, part: str) -> str:
    """Wait until the status line (written after the list is fetched) holds ``part``."""
    page.wait_for_function(
        "(part) => document.querySelector('.mibyan-sp-status').textContent.includes(part)",
        arg=part,
    )
    return text(page.locator(STATUS))


def listed_titles(page: Page) -> list[str]:
    return sorted(text(title) for title in page.locator(f"{ITEM} .mibyan-sp-title").all())


def test_an_instructor_reads_the_course_sessions_read_only(course: Course, page: Page) -> None:
    tabs = page.locator(".mibyan-sp-views")
    tabs.wait_for(state="visible")  # the server said: ivy instructs a course
    wait_status(page, "1 session")
    assert listed_titles(page) == [course.titles["ivy"]]  # My sessions: her own only
    assert page.locator(".mibyan-sp-owner").count() == 0

    page.locator(".mibyan-sp-view[data-view='course']").click()
    assert "2 sessions of your students" in wait_status(page, "of your students")
    assert listed_titles(page) == sorted([course.titles["ada"], course.titles["bob"]])
    owners = sorted(text(owner) for owner in page.locator(f"{ITEM} .mibyan-sp-owner").all())
    assert owners == sorted([course.names["ada"], course.names["bob"]])
    assert course.names["cat"] not in text(page.locator(".mibyan-sp"))
    assert not page.locator(".mibyan-sp-search").is_visible()  # search is one's own only
    # The title's markup is text: no element made of it, nothing run.
    assert page.locator(".mibyan-sp img").count() == 0
    assert page.evaluate("() => window.__pwned") is None

    ada = page.locator(ITEM, has=page.locator(".mibyan-sp-owner", has_text=course.names["ada"]))
    ada.click()
    details = page.locator(".mibyan-sp-details")
    assert text(details.locator(".mibyan-sp-d-owner")) == course.names["ada"]
    assert text(details.locator(".mibyan-sp-d-title")) == TITLE_WITH_MARKUP
    assert "Read-only" in text(details.locator(".mibyan-sp-readonly"))
    assert details.locator("button").count() == 0  # no open/resume/fork/rename/delete

    page.locator(".mibyan-sp-view[data-view='mine']").click()
    wait_status(page, "1 session")
    page.wait_for_function(
        "() => !document.querySelector('.mibyan-sp-status').textContent.includes('students')"
    )
    assert listed_titles(page) == [course.titles["ivy"]]
    assert page.locator(".mibyan-sp-search").is_visible()
    page.locator(ITEM).first.click()
    assert page.locator(".mibyan-sp-details button[data-action='resume']").count() == 1


def test_on_sqlite_the_panel_offers_no_course_view(lab: Lab) -> None:
    """The shared lab's store is a SQLite file: the server refuses ``scope=course``, so the
    switch stays hidden and the own sessions are listed as always."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        lab.server.api("GET", "/mibyan/api/sessions?scope=course")
    assert refused.value.code == 400
    lab.page.goto(f"{lab.server.url}/lab?reset&token={lab.server.token}")
    open_panel(lab.page)
    # The list is fetched after the server was asked about the course: once it is shown,
    # the switch has its final state.
    wait_status(lab.page, "session")
    assert lab.page.locator(".mibyan-sp-status.mibyan-sp-error").count() == 0
    assert lab.page.locator(".mibyan-sp-views").count() == 1
    assert not lab.page.locator(".mibyan-sp-views").is_visible()
    assert lab.page.locator(".mibyan-sp-search").is_visible()
