"""An XSS corpus in the prompt, the model's text and the tool's output renders inert in the
live view and in the final transcript.

Every payload tries to set ``window.__xss`` (and some to open a dialog). A MutationObserver
installed before the first run checks every element that enters ``.mibyan-view`` or
``.mibyan-transcript`` (and every attribute change there) for script-capable markup, so
markup that is shown only while streaming is caught too, not just the final DOM.

The demo model echoes a tool-less prompt (its first 200 characters) as Markdown and quotes
a tool's output (300 characters) in its answer, so the corpus is sent in small chunks to put
every payload through the model's Markdown, and printed by ``run_python`` to put it through
the tool card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .lab_driver import Lab, text

pytestmark = pytest.mark.browser

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

LOAD = "%load_ext mibyan_jupyter"

PAYLOADS = [
    "<img src=x onerror=window.__xss=1;alert(1)>",
    "<script>window.__xss=2;alert(2)</script>",
    '<a href="javascript:window.__xss=3">j3</a>',
    "<svg onload=window.__xss=4><circle r=9 /></svg>",
    '<iframe srcdoc="<script>parent.__xss=5</script>"></iframe>',
    '<p style="background:url(javascript:window.__xss=6);width:expression(window.__xss=6)">s6</p>',
    "<b onmouseover=window.__xss=7 onclick=window.__xss=7>b7</b>",
    '<a href="data:text/html,<script>parent.__xss=8</script>">d8</a>',
    "[m9](javascript:window.__xss=9)",
    "![i10](javascript:window.__xss=10)",
    "<details open ontoggle=window.__xss=11>t11</details>",
    '<object data="javascript:window.__xss=12"></object>',
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__xss=13>",
    "<input autofocus onfocus=window.__xss=14>",
    '<form><button formaction="javascript:window.__xss=15">f15</button></form>',
    '<a href=" jav&#x09;ascript:window.__xss=16">e16</a>',
    '<embed src="javascript:window.__xss=17">',
    "<video><source onerror=window.__xss=18></video>",
    "<javascript:window.__xss=19>",
    '<base href="javascript:window.__xss=20//">',
]

ECHO_LIMIT = 190  # the demo model echoes the first 200 characters of a prompt


def _chunks(items: list[str], limit: int) -> list[str]:
    chunks: list[str] = []
    for item in items:
        if chunks and len(chunks[-1]) + 1 + len(item) <= limit:
            chunks[-1] += "\n" + item
        else:
            chunks.append(item)
    return chunks


PAYLOAD_FILE = "xss_payloads.txt"


def _tool_cell() -> str:
    """The agent runs code printing every payload. The code reads them from a file: streamed
    in as the tool call's arguments at the demo's pace, the payloads themselves would cost
    seconds (they still stream in the prompt, and in the tool's output)."""
    corpus = "\n".join(PAYLOADS)
    return (
        "%%agent --tools python --approve auto\n"
        f"Use run_python on this:\n```python\nprint(open({PAYLOAD_FILE!r}).read())\n```\n{corpus}"
    )


# Records script-capable markup entering the agent's output, at every mutation.
OBSERVER_JS = """() => {
  window.__xss = undefined;
  window.__violations = [];
  window.__seenRunning = false;
  const ROOTS = '.mibyan-view, .mibyan-transcript';
  const TAGS = ['script', 'iframe', 'frame', 'frameset', 'object', 'embed', 'base', 'meta'];
  const URL_ATTRS = ['href', 'src', 'action', 'formaction', 'xlink:href', 'data', 'poster'];
  const check = (el) => {
    if (!(el instanceof Element) || !el.closest(ROOTS)) return;
    const tag = el.tagName.toLowerCase();
    if (TAGS.includes(tag)) window.__violations.push('<' + tag + '> ' + el.outerHTML.slice(0, 120));
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]+/g, '').toLowerCase();
      const where = tag + '[' + name + '="' + attr.value.slice(0, 80) + '"]';
      if (name.startsWith('on')) window.__violations.push(where);
      if (name === 'srcdoc') window.__violations.push(where);
      if (URL_ATTRS.includes(name) && /^(javascript|vbscript|data:text\\/html)/.test(value)) {
        window.__violations.push(where);
      }
      if (name === 'style' && /javascript:|expression\\(/.test(value)) window.__violations.push(where);
    }
  };
  const scan = (node) => {
    if (!(node instanceof Element)) return;
    check(node);
    node.querySelectorAll('*').forEach(check);
  };
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === 'attributes') check(record.target);
      record.addedNodes.forEach(scan);
    }
    const live = document.querySelector('.mibyan-view[data-status="running"]');
    if (live && live.textContent.includes('__xss')) window.__seenRunning = true;
  }).observe(document.body, { subtree: true, childList: true, attributes: true });
}"""

FINAL_SCAN_JS = """() => {
  const found = [];
  document.querySelectorAll('.mibyan-view, .mibyan-transcript').forEach((root) => {
    root.querySelectorAll('script, iframe, object, embed, base, meta').forEach(
      (el) => found.push('<' + el.tagName.toLowerCase() + '>'));
    root.querySelectorAll('*').forEach((el) => {
      for (const attr of Array.from(el.attributes)) {
        const value = attr.value.replace(/[\\s\\u0000-\\u001f]+/g, '').toLowerCase();
        if (attr.name.toLowerCase().startsWith('on') || value.startsWith('javascript:')) {
          found.push(el.tagName.toLowerCase() + '[' + attr.name + ']');
        }
      }
    });
  });
  return found;
}"""


@pytest.mark.timeout(120)
def test_xss_corpus_in_model_and_tool_output_renders_inert(lab: Lab) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    lab.page.on("dialog", on_dialog)
    echo_cells = [f"%%agent --tools none\n{chunk}" for chunk in _chunks(PAYLOADS, ECHO_LIMIT)]
    (lab.folder_path / PAYLOAD_FILE).write_text("\n".join(PAYLOADS) + "\n")
    lab.open_notebook("xss.ipynb", [LOAD, _tool_cell(), *echo_cells])
    lab.page.evaluate(OBSERVER_JS)
    lab.run_cell(0)

    transcripts = []
    for index in range(1, 2 + len(echo_cells)):
        transcript = lab.run_to_transcript(index)
        transcripts.append(text(transcript))
        assert transcript.get_attribute("data-status") == "completed"

    # Judge once every image in the output has loaded or failed (an onerror would have run).
    lab.page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.jp-OutputArea img')).every((i) => i.complete)"
    )
    assert lab.page.evaluate("() => window.__xss") is None, (
        f"a payload ran: window.__xss = {lab.page.evaluate('() => window.__xss')!r}"
    )
    assert dialogs == [], f"a payload opened a dialog: {dialogs}"
    violations = lab.page.evaluate("() => window.__violations")
    assert violations == [], f"script-capable markup entered the agent output: {violations}"
    assert lab.page.evaluate(FINAL_SCAN_JS) == []
    # Not vacuous: the payloads were shown (as text) while streaming and in the transcripts.
    assert lab.page.evaluate("() => window.__seenRunning"), (
        "the live view never showed the corpus while running"
    )
    tool_text = text(lab.transcript(1).locator(".mibyan-tool").first)
    assert "onerror" in tool_text, f"the tool output lost the payloads: {tool_text[:500]!r}"
    assert any("window.__xss" in shown for shown in transcripts[1:]), "no echo showed the corpus"
