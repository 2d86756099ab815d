"""The static transcript a cell keeps when its run ends (and that ``%agent resume`` shows for
a stored history), rendered by the export layer: readable, sanitized, without secrets."""

from __future__ import annotations

import re

import pytest
from transcript_support import CORPUS, KEY, PNG, assert_inert, conversation

from mibyan_jupyter.core.messages import Usage
from mibyan_jupyter.export.render import SessionMeta
from mibyan_jupyter.export.transcript import render_transcript

SESSION = SessionMeta(id="s-1234", title="Explore the data", model="demo")


def test_the_transcript_reads_as_the_conversation() -> None:
    bundle = render_transcript(conversation(), session=SESSION, demo=True, status="completed")
    assert set(bundle) == {"text/html", "text/markdown", "text/plain"}
    page = bundle["text/html"]
    assert page.startswith('<div class="mibyan-transcript" data-status="completed"')
    assert page.count('class="mibyan-user"') == 1
    assert page.count('class="mibyan-assistant"') == 2  # the calls-only reply has no text
    assert page.count('class="mibyan-tool"') == 3  # python, search, the unanswered call
    assert "<strong>x</strong>" in page
    assert '<details class="mibyan-thinking"><summary>Thinking</summary>' in page
    assert "consider the axes" in page
    assert "plt.plot([1, 2])" in re.sub(r"<[^>]+>", "", page)  # code is coloured: spans
    assert '<span class="k" style="color:#008000;font-weight:bold">import</span>' in page
    assert f'<img src="data:image/png;base64,{PNG}"' in page
    assert page.count("<img") == 1  # the fake PNG (an SVG) and the javascript: image are dropped
    assert "<b>table</b>" in page
    assert "ValueError: bad" in page
    assert "truncated, 1,000 more characters" in page
    assert "No result was recorded" in page
    assert "not exported" not in page
    footer = re.search(r'<div class="mibyan-footer"[^>]*>(.*?)</div>', page)
    assert footer is not None
    assert footer[1] == (
        "demo (demo model) · 3 turns · 635 tokens · $0.0032 · completed · "
        "Explore the data · session s-1234"
    )
    markdown = bundle["text/markdown"]
    assert markdown.startswith("**You**\n\nPlot **x**")
    assert "```python\nimport matplotlib.pyplot as plt" in markdown
    assert "*(image)*" in markdown
    assert "truncated, 1,000 more characters" in markdown
    plain = bundle["text/plain"]
    assert plain.startswith("You:\nPlot **x**")
    assert "Python (run_python):\nimport matplotlib" in plain
    assert plain.endswith("session s-1234")


def test_an_empty_history_and_an_interrupted_status() -> None:
    bundle = render_transcript(
        [], session=SESSION, demo=True, status="interrupted", usage=Usage(total=7)
    )
    assert 'data-status="interrupted"' in bundle["text/html"]
    assert "0 turns · 7 tokens · cost unknown · interrupted" in bundle["text/plain"]


def test_model_and_tool_output_render_inert() -> None:
    bundle = render_transcript(conversation(CORPUS), session=SESSION, demo=True, status="completed")
    assert_inert(bundle["text/html"])
    # No image loads by itself (a URL could carry data out); only the validated PNG is one.
    assert bundle["text/html"].count("<img") == 1
    assert (
        '<a href="https://evil.example/?q=secret" rel="noopener noreferrer">' in bundle["text/html"]
    )
    # The payloads are shown as text, not dropped without a trace.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in bundle["text/html"]
    markdown = bundle["text/markdown"]
    assert "<script>" not in markdown.replace("```html\n<script>", "")  # code stays code
    assert "](javascript:" not in markdown.lower()
    assert "onerror=alert(1)>" not in markdown.replace("&lt;img src=x onerror=alert(1)>", "")


def test_no_secret_in_the_transcript(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIBYAN_TRANSCRIPT_TEST_API_KEY", KEY)
    bundle = render_transcript(conversation(KEY), session=SESSION, demo=True, status="completed")
    for value in bundle.values():
        assert KEY not in value
        assert "[redacted]" in value
