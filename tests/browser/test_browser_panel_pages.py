"""The Agent sessions panel's search hits and its paging, in JupyterLab in Chromium.

Split from test_browser_panel.py (whose fixtures and helpers it uses, so it reads and writes the
same store the lab server's sessions API serves) to keep each module readable. A search's hits
are rows under their session, snippets verbatim with the matched words in ``<mark>``s; a list
longer than a page ends in a "Load more" row, and lineage groups stay right across pages.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mibyan_jupyter.core.messages import AssistantMessage, UserMessage
from mibyan_jupyter.store.records import append_message
from mibyan_jupyter.store.sessions import SessionStore

from . import test_browser_panel as panel
from .lab_driver import Lab, text
from .test_browser_panel import ITEM, command, item, open_panel, search, server_store

pytestmark = pytest.mark.browser

lab_server = panel.lab_server
"""The shared JupyterLab when it serves the sessions API, else one with the API enabled."""
api = panel.api
"""The lab, once its server answers the sessions API."""


PAGE_SIZE = 100
"""The panel's page (PAGE_SIZE in labextension/src/panel.ts): one "Load more" adds this many."""

HIT = ".mibyan-sp .mibyan-sp-hit"


def seed_pages(db: Path, word: str) -> dict[str, str]:
    """A root whose message holds code and markup, oldest; more than a page of fillers; then
    a fork of the root, newest: the fork is on the first page and its root only on the second."""
    with SessionStore(db) as store:
        root = store.create(f"Sales {word}", model="demo")
        append_message(
            store.db, root.id, UserMessage(content=f'plot sales["year"] as <b>html</b> {word}')
        )
        append_message(store.db, root.id, AssistantMessage(content=f"done: {word} plotted"))
        for n in range(PAGE_SIZE + 5):
            filler = store.create(f"Filler {word} {n}", model="demo")
            append_message(store.db, filler.id, UserMessage(content=f"note {n} on wombat{word}"))
        fork = store.fork(root.id)
        store.rename(fork.id, f"Sales fork {word}")
    return {"root": root.id, "fork": fork.id}


def check_load_more(lab: Lab, word: str, ids: dict[str, str]) -> None:
    """The first page has the fork heading its own group; Enter on "Load more" (reached by
    End) brings the rest, the root among them, and the fork moves under it."""
    fork, root = item(lab, f"Sales fork {word}"), item(lab, f"Sales {word}")
    fork.wait_for()
    assert root.count() == 0, "the root is older than a page of sessions"
    assert fork.get_attribute("aria-level") == "1"
    fillers = lab.page.locator(ITEM, has_text=f"Filler {word}")
    assert fillers.count() == PAGE_SIZE - 1
    more = lab.page.locator(".mibyan-sp-more")
    assert "Load more" in text(more)
    fork.click()
    lab.page.keyboard.press("End")
    assert lab.page.evaluate("document.activeElement.dataset.key") == "more"
    lab.page.keyboard.press("Enter")
    root.wait_for()
    assert fillers.count() == PAGE_SIZE + 5
    assert fork.get_attribute("aria-level") == "2", "the fork did not join its root's group"
    group = lab.page.locator(f".mibyan-sp-group:has([data-session-id='{ids['root']}'])")
    assert group.locator(f"[data-session-id='{ids['fork']}']").count() == 1
    focused = lab.page.evaluate("document.activeElement.dataset.key ?? ''")
    assert focused not in ("", "more"), "focus should go to the first row the page added"
    lab.screenshot("panel-paged")


def check_hits(lab: Lab, word: str, ids: dict[str, str]) -> None:
    """Each hit is a row under its session: role, snippet verbatim, the word in a <mark>; the
    keyboard reaches it and Enter opens that session's transcript."""
    search(lab, word)
    hits = lab.page.locator(f"{HIT}[data-hit-session='{ids['root']}']")
    hits.first.wait_for()
    user = hits.filter(has=lab.page.locator(".mibyan-sp-role", has_text="user"))
    snippet = user.locator(".mibyan-sp-snippet")
    assert text(snippet) == f'plot sales["year"] as <b>html</b> {word}'
    assert snippet.locator("b").count() == 0, "the snippet's markup must stay text"
    assert snippet.locator("mark").all_text_contents() == [word]
    assert lab.page.locator(f"{HIT}[data-hit-session='{ids['fork']}']").count() >= 1
    lab.screenshot("panel-hits")
    item(lab, f"Sales {word}").click()
    lab.page.keyboard.press("ArrowDown")
    key = lab.page.evaluate("document.activeElement.dataset.key")
    assert key.startswith(f"hit:{ids['root']}:"), key
    lab.page.keyboard.press("Enter")
    transcript = lab.page.locator(f"#mibyan-transcript-{ids['root']} .mibyan-sp-transcript")
    transcript.wait_for(state="visible")
    assert f"{word} plotted" in text(transcript)
    lab.page.locator(f"{HIT}[data-hit-session='{ids['fork']}']").first.click()
    lab.page.locator(f"#mibyan-transcript-{ids['fork']}").wait_for(state="visible")


def check_more_hits(lab: Lab, word: str) -> None:
    """A search with more hits than a page ends in "Load more matches" too (the API's search
    has no offset: the panel asks again with a larger limit)."""
    search(lab, f"wombat{word}")
    more = lab.page.locator(".mibyan-sp-more")
    more.wait_for()
    assert lab.page.locator(HIT).count() == PAGE_SIZE
    more.focus()
    lab.page.keyboard.press("Enter")
    more.wait_for(state="detached")
    assert lab.page.locator(HIT).count() == PAGE_SIZE + 5


@pytest.mark.timeout(150)
def test_search_hits_are_marked_verbatim_and_the_list_loads_more(api: Lab) -> None:
    lab = api
    word = f"quokka{uuid.uuid4().hex[:8]}"
    ids = seed_pages(server_store(lab), word)
    lab.open_notebook("pages.ipynb", ["1 + 1"])
    open_panel(lab)
    lab.page.locator(".mibyan-sp-search").fill("")  # a panel an earlier test left searching
    command(lab, "mibyan:open-sessions-panel")  # refreshes now
    check_load_more(lab, word, ids)
    check_hits(lab, word, ids)
    check_more_hits(lab, word)
