"""The Agent sessions panel and the %%agent editor support, in JupyterLab in Chromium.

The panel reads the server's session store through the sessions REST API
(mibyan_jupyter/server/), so these tests write to the store the *server* opens (the lab
server's ``MIBYAN_DB``), not the per-folder store the other browser tests' kernels use: the
seeded sessions are written there directly, and a kernel that should appear in the panel is
pointed there by its first cell. Every seeded title carries the test's own word, so what other
tests leave in that store cannot match.
"""

from __future__ import annotations

import json
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mibyan_jupyter.core.messages import AssistantMessage, UserMessage
from mibyan_jupyter.store.records import append_message, set_status
from mibyan_jupyter.store.sessions import SessionStore

from .lab_driver import Lab, LabServer, text
from .lab_process import BUILT_LABEXTENSION

if TYPE_CHECKING:
    from playwright.sync_api import Locator

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser

ITEM = ".mibyan-sp .mibyan-sp-item"


def server_store(lab: Lab) -> Path:
    """The database the lab server's sessions API serves (the server's MIBYAN_DB)."""
    return Path(lab.server.env["MIBYAN_DB"])


def setup_cell(lab: Lab) -> str:
    """A kernel's first cell: use the server's store, then load the extension."""
    return (
        f"import os\nos.environ['MIBYAN_DB'] = {str(server_store(lab))!r}\n%load_ext mibyan_jupyter"
    )


def serves_api(server: LabServer) -> bool:
    try:
        server.api("GET", "/mibyan/api/sessions?limit=1")
    except urllib.error.HTTPError:
        return False
    return True


@pytest.fixture(scope="module")
def lab_server(
    lab_server: LabServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabServer]:
    """The shared JupyterLab when it serves the sessions API; else one of this module's own
    with the server extension enabled the way an installed wheel enables it (the config
    file of jupyter-config/ on the config path)."""
    if serves_api(lab_server):
        yield lab_server
        return
    own = LabServer(tmp_path_factory.mktemp("jupyterlab-panel"), labextension=BUILT_LABEXTENSION)
    own.env["JUPYTER_CONFIG_PATH"] = str(REPO / "jupyter-config")
    own.start()
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture
def api(lab: Lab) -> Lab:
    """The lab, once its server answers the sessions API (else the failure says why)."""
    try:
        lab.server.api("GET", "/mibyan/api/sessions?limit=1")
    except urllib.error.HTTPError as error:
        pytest.fail(
            f"the lab server does not serve /mibyan/api/ (HTTP {error.code}): the server "
            "extension mibyan_jupyter.server is not enabled for the browser tests' server"
        )
    return lab


def command(lab: Lab, name: str, args: dict[str, object] | None = None) -> None:
    lab.page.evaluate(
        "([name, args]) => { void window.jupyterapp.commands.execute(name, args); }",
        [name, args or {}],
    )


def open_panel(lab: Lab) -> None:
    command(lab, "mibyan:open-sessions-panel")
    lab.page.locator(".mibyan-sp").wait_for(state="visible")


def item(lab: Lab, title: str) -> Locator:
    return lab.page.locator(ITEM, has=lab.page.locator(".mibyan-sp-title", has_text=title))


def button(lab: Lab, action: str) -> Locator:
    return lab.page.locator(f".mibyan-sp-details button[data-action='{action}']")


def search(lab: Lab, words: str) -> None:
    box = lab.page.locator(".mibyan-sp-search")
    box.fill(words)
    # The status line says "matching" for a search's answer only: wait for this one's.
    lab.page.wait_for_function(
        "(q) => document.querySelector('.mibyan-sp-status').textContent"
        ".includes('matching') === (q !== '')",
        arg=words,
    )


def seed(db: Path, word: str) -> dict[str, str]:
    """A lineage (root + fork) about ``word`` and three sessions with each status badge."""
    with SessionStore(db) as store:
        root = store.create(f"Alpha {word}", model="demo", notebook_path="work/alpha.ipynb")
        append_message(store.db, root.id, UserMessage(content=f"tell me about {word} stripes"))
        append_message(store.db, root.id, AssistantMessage(content=f"{word} stripes are bold"))
        fork = store.fork(root.id)
        store.rename(fork.id, f"Alpha fork {word}")
        ids = {"root": root.id, "fork": fork.id}
        for status in ("running", "awaiting_approval", "interrupted"):
            info = store.create(f"{status} {word}", model="demo")
            append_message(store.db, info.id, UserMessage(content=f"{status} prompt"))
            set_status(store.db, info.id, status)  # owned by this (live) process
            ids[status] = info.id
    return ids


DARK_PANEL_JS = """() => {
  const [r, g, b] = getComputedStyle(document.querySelector('.mibyan-sp'))
    .backgroundColor.match(/\\d+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 < 0.35;
}"""
"""The panel's background is dark: it follows the theme's variables."""


def check_lineage_and_badges(lab: Lab, word: str) -> None:
    """The fork sits under its root, one level down, labelled; each status has its badge."""
    fork = item(lab, f"Alpha fork {word}")
    assert fork.get_attribute("aria-level") == "2"
    assert "fork" in text(fork.locator(".mibyan-sp-link"))
    assert item(lab, f"Alpha {word}").get_attribute("aria-expanded") == "true"
    for status, badge in (
        ("running", "running"),
        ("awaiting_approval", "awaiting approval"),
        ("interrupted", "interrupted"),
    ):
        assert text(item(lab, f"{status} {word}").locator(".mibyan-sp-badge")) == badge


def check_keyboard(lab: Lab, word: str, ids: dict[str, str]) -> None:
    """Arrows move in the tree, Left closes the lineage, Right opens it again."""
    root, fork = item(lab, f"Alpha {word}"), item(lab, f"Alpha fork {word}")
    root.click()
    lab.page.keyboard.press("ArrowDown")
    focused = lab.page.evaluate("document.activeElement.dataset.sessionId")
    assert focused == ids["fork"], "ArrowDown from the root did not reach its fork"
    lab.page.keyboard.press("ArrowUp")
    lab.page.keyboard.press("ArrowLeft")
    assert root.get_attribute("aria-expanded") == "false"
    assert not fork.is_visible()
    lab.page.keyboard.press("ArrowRight")
    assert fork.is_visible()


def check_search_and_transcript(lab: Lab, word: str) -> None:
    """The server's search leaves the lineage whose messages hold the word; Enter on an item
    opens its transcript, read-only, in the main area."""
    search(lab, word)
    lab.page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.mibyan-sp-item'))"
        ".every((i) => i.textContent.includes('Alpha'))"
    )
    assert item(lab, f"running {word}").count() == 0
    lab.screenshot("panel-search")
    item(lab, f"Alpha {word}").focus()
    lab.page.keyboard.press("Enter")
    transcript = lab.page.locator(".mibyan-sp-transcript")
    transcript.wait_for(state="visible")
    assert f"{word} stripes" in text(transcript)
    assert transcript.locator("script").count() == 0


def check_export(lab: Lab, word: str, folder: Path) -> None:
    """Real downloads (ipynb and md), and the line saying what the file includes."""
    item(lab, f"Alpha {word}").click()
    with lab.page.expect_download() as download_info:
        button(lab, "export-ipynb").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".ipynb")
    saved = folder / download.suggested_filename
    download.save_as(saved)
    notebook = json.loads(saved.read_text())
    assert any(f"{word} stripes" in "".join(c["source"]) for c in notebook["cells"])
    lab.page.wait_for_function(
        "() => document.querySelector('.mibyan-sp-includes').textContent.trim() !== ''"
    )
    with lab.page.expect_download() as markdown_info:
        button(lab, "export-md").click()
    markdown = markdown_info.value
    assert markdown.suggested_filename.endswith(".md")
    markdown.save_as(folder / markdown.suggested_filename)
    assert f"{word} stripes" in (folder / markdown.suggested_filename).read_text()


def check_rename_fork_delete(lab: Lab, word: str, ids: dict[str, str], db: Path) -> None:
    """Rename through its dialog; Fork says what the copy holds and the copy joins the
    lineage; Delete asks first (Cancel keeps it, Delete removes it from list and store)."""
    dialog = lab.page.locator(".jp-Dialog")
    button(lab, "rename").click()
    dialog.locator("input").fill(f"Renamed {word}")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    item(lab, f"Renamed {word}").wait_for()
    with SessionStore(db) as store:
        assert store.get(ids["root"]).title == f"Renamed {word}"

    button(lab, "fork").click()
    assert "all 2 messages" in text(dialog.locator(".jp-Dialog-body"))
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    lab.page.wait_for_function(
        "(id) => document.querySelectorAll(`.mibyan-sp-group:has([data-session-id='${id}'])"
        " .mibyan-sp-item[aria-level='2']`).length === 2",
        arg=ids["root"],
    )
    with SessionStore(db) as store:
        assert len(store.children(ids["root"])) == 2

    item(lab, f"Alpha fork {word}").click()
    button(lab, "delete").click()
    dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
    assert item(lab, f"Alpha fork {word}").count() == 1
    button(lab, "delete").click()
    dialog.locator(".jp-Dialog-button.jp-mod-warn").click()
    item(lab, f"Alpha fork {word}").wait_for(state="detached")
    with SessionStore(db) as store:
        assert all(info.id != ids["fork"] for info in store.list(limit=None))


def check_polling_and_dark_mode(lab: Lab, word: str, ids: dict[str, str], db: Path) -> None:
    """While a listed session runs the panel refreshes by itself; dark mode follows the theme."""
    search(lab, "")  # waits for that refresh, so only polling can show what follows
    with SessionStore(db) as store:
        store.rename(ids["running"], f"still running {word}")
    item(lab, f"still running {word}").wait_for(timeout=10_000)
    lab.screenshot("panel-light")
    command(lab, "apputils:change-theme", {"theme": "JupyterLab Dark"})
    try:  # the theme is a saved setting of the shared server: always put it back
        lab.page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        lab.page.wait_for_function(DARK_PANEL_JS)
        lab.page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
        lab.screenshot("panel-dark")
    finally:
        command(lab, "apputils:change-theme", {"theme": "JupyterLab Light"})
        lab.page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")


@pytest.mark.timeout(150)
def test_panel_lists_groups_searches_and_acts(api: Lab, tmp_path: Path) -> None:
    lab = api
    word = f"zebra{uuid.uuid4().hex[:8]}"
    db = server_store(lab)
    ids = seed(db, word)
    lab.open_notebook("panel.ipynb", ["1 + 1"])
    open_panel(lab)
    item(lab, f"Alpha {word}").wait_for()
    check_lineage_and_badges(lab, word)
    check_keyboard(lab, word, ids)
    check_search_and_transcript(lab, word)
    check_export(lab, word, tmp_path)
    check_rename_fork_delete(lab, word, ids, db)
    check_polling_and_dark_mode(lab, word, ids, db)


@pytest.mark.timeout(150)
def test_resume_here_after_a_kernel_restart_and_a_leased_session_cannot_be_deleted(
    api: Lab,
) -> None:
    lab = api
    word = f"pineapple{uuid.uuid4().hex[:8]}"
    lab.open_notebook("resume.ipynb", [setup_cell(lab), f"%%agent --tools none\nRemember {word}."])
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"

    open_panel(lab)
    search(lab, word)
    found = lab.page.locator(ITEM)
    found.first.wait_for()
    assert found.count() == 1, f"one session should mention {word}: {found.all_text_contents()}"
    found.first.click()
    delete = button(lab, "delete")
    assert delete.is_disabled(), "the kernel holding the session must keep it from deletion"
    assert "kernel" in text(lab.page.locator(".mibyan-sp-blocked")).lower()
    lab.screenshot("leased")

    lab.restart_kernel()
    lab.run_cell(0)
    command(lab, "mibyan:open-sessions-panel")  # refreshes
    lab.page.wait_for_function(
        "() => !document.querySelector(\".mibyan-sp-details button[data-action='delete']\")"
        "?.disabled"
    )
    lab.page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 1")
    button(lab, "resume").click()
    lab.page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.length === 3"
    )
    source = lab.page.evaluate(
        "window.jupyterapp.shell.currentWidget.content.widgets[2].model.sharedModel.getSource()"
    )
    assert source.startswith("%agent resume ")
    history = lab.wait_transcript(2)
    assert word in text(history), f"the resumed history lacks the prompt: {text(history)[:800]!r}"
    lab.screenshot("resumed")
