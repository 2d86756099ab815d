"""Tomorrow's notebook: after a kernel restart, a new notebook resumes the last session
(``%agent resume last`` shows its history) and the next ``%%agent`` cell continues it.

The conversation lives in the test's own SQLite store (its kernels' ``MIBYAN_DB``, see
lab_process.py), which the test reads directly to check that the continued prompt was added
to the same session, not a new one.
"""

from __future__ import annotations

import uuid

import pytest

from mibyan_jupyter.core.messages import UserMessage, content_text
from mibyan_jupyter.store.records import load_messages
from mibyan_jupyter.store.sessions import SessionStore

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

LOAD = "%load_ext mibyan_jupyter"


def _sessions_with(lab: Lab, *texts: str) -> list[str]:
    """Ids of the stored sessions whose user prompts contain every one of ``texts``."""
    found = []
    with SessionStore(lab.db_path) as store:
        for info in store.list(limit=100):
            prompts = " ".join(
                content_text(m.content)
                for m in load_messages(store.db, info.id)
                if isinstance(m, UserMessage)
            )
            if all(wanted in prompts for wanted in texts):
                found.append(info.id)
    return found


@pytest.mark.timeout(120)
def test_resume_last_after_restart_in_a_new_notebook_continues(lab: Lab) -> None:
    word = f"pineapple-{uuid.uuid4().hex[:8]}"
    first_prompt = f"Remember the word {word}."
    lab.open_notebook("day1.ipynb", [LOAD, f"%%agent --tools none\n{first_prompt}"])
    lab.run_cell(0)
    assert lab.run_to_transcript(1).get_attribute("data-status") == "completed"
    lab.restart_kernel()

    lab.open_in_app("day2.ipynb", [LOAD, "%agent resume last", "%%agent --tools none\nand now?"])
    lab.run_cell(0)
    history = lab.run_to_transcript(1)
    assert word in text(history), (
        f"%agent resume last does not show the earlier prompt: {text(history)[:1000]!r}"
    )

    answer = lab.run_to_transcript(2)
    assert answer.get_attribute("data-status") == "completed"
    assert "and now?" in text(answer.locator(".mibyan-user"))
    assert answer.locator(".mibyan-assistant").count() >= 1
    assert text(answer.locator(".mibyan-assistant").last).strip(), "no answer text"
    continued = _sessions_with(lab, first_prompt, "and now?")
    assert len(continued) == 1, (
        f"expected one stored session holding both prompts, found {continued}: "
        "the new cell did not continue the resumed session"
    )
