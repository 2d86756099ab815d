"""A spilled tool result on the live view: the card shows the preview and offers the full
text, which the page asks the kernel for (an ``expand`` message) and gets in chunks of at
most 64 KB (``page`` ops), read from the session's result store in a real SQLite file.
Only the view's own spilled calls can be read; once the run ended, nothing is answered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from view_support import HEADER, Recorder, click, record_comms

from mibyan_jupyter.core.events import ToolExecutionEnd
from mibyan_jupyter.core.messages import ToolMessage
from mibyan_jupyter.core.results import RESULT_LIMIT, MemoryResults, spill
from mibyan_jupyter.jupyter.state import reset_kernel_state
from mibyan_jupyter.jupyter.view import AgentView
from mibyan_jupyter.jupyter.view.spill import BOUNDARY_SLACK, PAGE_CHARS
from mibyan_jupyter.store.results import SessionResults
from mibyan_jupyter.store.sessions import SessionStore
from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

BIG = "".join(f"row {i} é😀 <b>not html</b>\n" for i in range(8_000))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return record_comms(monkeypatch)


@pytest.fixture
def results(tmp_path: Path) -> Iterator[SessionResults]:
    with SessionStore(tmp_path / "s.sqlite3") as store:
        yield SessionResults(store.db, store.create("big").id)


def spilled_view(results: Any, call_id: str = "c1") -> AgentView:
    view = AgentView(HEADER)
    view.read_results_from(results)
    kept = spill(ToolMessage(tool_call_id=call_id, name="read_file", content=BIG), results, 16_000)
    view(ToolExecutionEnd(call_id=call_id, name="read_file", result=kept, is_error=False))
    return view


def expand(view: AgentView, recorder: Recorder, call_id: str, offset: Any) -> list[dict[str, Any]]:
    before = len(recorder.ops("page"))
    click(view, {"type": "expand", "call_id": call_id, "offset": offset})
    return recorder.ops("page")[before:]


def test_the_card_shows_the_preview_and_loads_the_whole_text_in_chunks(
    recorder: Recorder, results: SessionResults
) -> None:
    view = spilled_view(results)
    (result,) = recorder.ops("result")
    assert result["spilled"] == len(BIG)
    assert result["text"].startswith("[This result is")  # the preview, not the text
    text, offset, pages = "", 0, 0
    while True:
        (page,) = expand(view, recorder, "c1", offset)
        assert page["offset"] == offset
        assert page["error"] == ""
        assert len(page["text"]) <= PAGE_CHARS + BOUNDARY_SLACK
        assert page["done"] or page["text"][-1].isspace()  # a page ends at a space
        assert page["next"] == offset + len(page["text"])  # nothing here is redacted
        text, offset, pages = text + page["text"], page["next"], pages + 1
        if page["done"]:
            break
    assert text == BIG
    assert pages == len(BIG) // PAGE_CHARS + 1
    assert max(s.size for s in recorder.custom()) < 4 * PAGE_CHARS  # one chunk per message


@pytest.mark.parametrize(
    ("call_id", "offset"),
    [("c9", 0), ("c1", -1), ("c1", "0"), ("c1", True), (None, 0), ("small", 0)],
)
def test_only_the_views_own_spilled_calls_are_answered(
    recorder: Recorder, results: SessionResults, call_id: Any, offset: Any
) -> None:
    view = spilled_view(results)
    small = ToolMessage(tool_call_id="small", name="t", content="short")
    view(ToolExecutionEnd(call_id="small", name="t", result=small, is_error=False))
    assert "spilled" not in recorder.ops("result")[-1]
    assert expand(view, recorder, call_id, offset) == []


def test_after_the_run_nothing_is_answered(recorder: Recorder, results: SessionResults) -> None:
    """The static transcript takes the live view's place: it shows the preview only."""
    view = spilled_view(results)
    view.finish([], status="completed")
    assert view._widget.comm is None  # closed: no page can ask any more
    assert recorder.sent[-1].msg_type == "comm_close"


class Failing(MemoryResults):
    """A store whose rows are gone (``None``) or whose file cannot be read (raises)."""

    def __init__(self, error: Exception | None) -> None:
        super().__init__()
        self.error = error

    def page(self, result_id: str, offset: int, limit: int) -> str | None:
        if self.error is not None:
            raise self.error
        return None


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (None, "the full result is no longer kept"),
        (OSError("disk I/O error"), "the full result could not be read: disk I/O error"),
    ],
)
def test_an_unreadable_result_says_why_on_the_card(
    recorder: Recorder, error: Exception | None, said: str
) -> None:
    view = spilled_view(Failing(error))
    (page,) = expand(view, recorder, "c1", 0)
    assert (page["text"], page["done"], page["error"]) == ("", True, said)


def test_a_view_without_a_store_says_so(recorder: Recorder) -> None:
    view = AgentView(HEADER)
    kept = spill(ToolMessage(tool_call_id="c2", name="t", content=BIG), MemoryResults(), 16_000)
    view(ToolExecutionEnd(call_id="c2", name="t", result=kept, is_error=False))
    (page,) = expand(view, recorder, "c2", 0)
    assert page["error"] == "the full result cannot be read from here"


# -- in a cell: a real shell, loopback HTTP and the session's SQLite file --------------------


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("MIBYAN_DB", str(tmp_path / "sessions.sqlite3"))
    monkeypatch.setenv("MIBYAN_MEMORY_DIR", str(tmp_path / "memory"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "JPY_SESSION_NAME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    reset_kernel_state()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mibyan_jupyter")
    yield ip
    ip.run_line_magic("unload_ext", "mibyan_jupyter")
    reset_kernel_state()
    InteractiveShell.clear_instance()


def test_a_cell_pages_a_spilled_result_from_the_session_store_while_it_runs(
    shell: InteractiveShell,
    fake_provider: FakeProviderServer,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from mibyan_jupyter.jupyter.cell import run

    (tmp_path / "big.txt").write_text(BIG, encoding="utf-8")
    views: list[AgentView] = []
    real_view = run.AgentView

    def recording_view(*args: Any, **kwargs: Any) -> AgentView:
        views.append(real_view(*args, **kwargs))
        return views[-1]

    monkeypatch.setattr(run, "AgentView", recording_view)

    def on_custom(batch: list[Any]) -> None:  # the page clicks as soon as the card shows
        for item in batch[1:]:
            if isinstance(item, dict) and item.get("op") == "result" and item.get("spilled"):
                message = {"type": "expand", "call_id": item["id"], "offset": 0}
                asyncio.get_running_loop().call_soon(click, views[-1], message)

    recorder.on_custom = on_custom
    read = FakeCall("read_file", {"path": "big.txt", "max_chars": 200_000})
    fake_provider.push(FakeReply("", calls=[read]), FakeReply("It is a table."))
    model = f"fake:m@{fake_provider.base_url}"
    result = shell.run_cell(f"%%agent --model {model} --tools files\nread big.txt\n")
    assert result.error_in_exec is None, result.error_in_exec
    (card,) = recorder.ops("result")
    assert card["spilled"] > RESULT_LIMIT
    (page,) = recorder.ops("page")
    assert page["error"] == ""
    assert page["offset"] == 0
    assert page["text"] == BIG[: len(page["text"])]
    assert PAGE_CHARS <= len(page["text"]) <= PAGE_CHARS + BOUNDARY_SLACK
    assert all(len(r.raw) < len(BIG) for r in fake_provider.requests)  # never the whole


def test_a_key_across_a_page_boundary_is_redacted_in_both_pages(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outbox redacts each op on its own: a page must not cut a key in two halves
    that no redaction matches (a page ends at a space, up to the slack)."""
    key = "sk-proj-" + "Zq9" * 12
    monkeypatch.setenv("OPENAI_API_KEY", key)
    text = "x" * (PAGE_CHARS - 10) + " " + key + " tail\n" + "y " * 40_000
    view = AgentView(HEADER)
    store = MemoryResults()
    view.read_results_from(store)
    kept = spill(ToolMessage(tool_call_id="k", name="read_file", content=text), store, 16_000)
    view(ToolExecutionEnd(call_id="k", name="read_file", result=kept, is_error=False))
    pages, offset = [], 0
    while True:
        (page,) = expand(view, recorder, "k", offset)
        pages.append(page["text"])
        offset = page["next"]  # the redacted text is shorter than what was read
        if page["done"]:
            break
    shown = "".join(pages)
    assert key not in shown
    assert all(key[:12] not in p and key[-12:] not in p for p in pages), "no half of it either"
    assert shown.count("tail") == 1
