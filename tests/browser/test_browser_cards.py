"""Batch approvals, tool cards and the footer in JupyterLab (issue 11, parts 1, 4, 5):

* three ``run_python`` calls of one reply show three approval cards at once, with
  "Approve all (3)"; decided in reverse order (the last denied with a reason, then the
  second, then the first approved), each decided card folds to one line saying who decided
  and why, and the calls still run in call order, their results in call order;
* the keyboard: Esc on a focused card goes to the reason, Enter there denies; then
  "Approve all (2)" approves the other two at once;
* the footer shows labelled parts (model, turns, tokens, status, session with Copy), and a
  message shows its time, tokens and cost on hover.

The kernel is a process of the Lab server, so the fake provider runs here on 127.0.0.1 and
the cells name it as their model. One module, so one JupyterLab and one Chromium.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply

from .lab_driver import Lab, text

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LOAD = "%load_ext mibyan_jupyter"
THREE_CARDS_JS = (
    "(cell) => cell.node.querySelectorAll("
    "'.mibyan-view .mibyan-approval[data-pending=\"true\"] button.mibyan-approve').length === 3"
)


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def three_calls(server: FakeProviderServer) -> None:
    calls = [FakeCall("run_python", {"code": f"print('ran {n}')"}, id=f"c{n}") for n in (1, 2, 3)]
    server.push(FakeReply("Three steps.", calls=calls), FakeReply("All three handled."))


def open_cell(lab: Lab, server: FakeProviderServer, name: str) -> None:
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(name, [LOAD, f"%%agent --model {model} --tools python\nRun three steps."])
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_while_running(1, THREE_CARDS_JS, "three approval cards at once")


def card(lab: Lab, call_id: str):  # type: ignore[no-untyped-def]
    return lab.view(1).locator(f".mibyan-tool[data-call-id='{call_id}']")


def wait_folded(lab: Lab, call_id: str) -> str:
    """Wait until the approval of ``call_id`` is decided (one line); return the line."""
    line = card(lab, call_id).locator(".mibyan-approval.mibyan-decided .mibyan-approval-outcome")
    line.wait_for(state="visible", timeout=10_000)
    return text(line)


def tool_results(server: FakeProviderServer) -> list[tuple[str, str]]:
    body = server.requests[-1].body
    assert isinstance(body, dict)
    return [(m["tool_call_id"], str(m["content"])) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.timeout(180)
def test_three_calls_decided_in_reverse_order_run_in_call_order(
    lab: Lab, server: FakeProviderServer
) -> None:
    three_calls(server)
    open_cell(lab, server, "reverse.ipynb")
    view = lab.view(1)
    assert view.get_attribute("data-status") == "awaiting_approval"
    batch = view.locator(".mibyan-batch button.mibyan-approve-all")
    assert text(batch) == "Approve all (3)"
    powers = view.locator(".mibyan-approval .mibyan-powers")
    assert powers.count() == 3
    assert "runs with your powers" in text(powers.first)
    assert "print('ran 3')" in text(card(lab, "c3").locator(".mibyan-approval-args"))
    footer = view.locator(".mibyan-footer")
    model = text(footer.locator(".mibyan-part[data-name='model'] .mibyan-part-value"))
    assert model == "fake:demo"  # the header's name for the model (no URL)
    assert text(footer.locator(".mibyan-part[data-name='status']")).endswith("waiting for you")
    session = footer.locator(".mibyan-part[data-name='session']")
    assert session.locator("button.mibyan-copy-session").is_visible()
    assert len(text(session.locator(".mibyan-footer-session"))) == 8
    stats = view.locator(".mibyan-assistant .mibyan-msg-stats").first
    assert not stats.is_visible()
    view.locator(".mibyan-assistant").first.hover()
    assert stats.is_visible()  # per-message time, tokens and cost on hover
    assert "tokens in" in text(stats)
    lab.screenshot("cards-three-waiting")
    in_theme(lab, "JupyterLab Dark", "cards-three-waiting-dark")

    third = card(lab, "c3").locator(".mibyan-approval")
    third.locator("input.mibyan-deny-reason").fill("not the third")
    third.locator("button.mibyan-deny").click()
    line = wait_folded(lab, "c3")
    assert line == "denied by you: not the third"
    assert card(lab, "c3").locator(".mibyan-approval button").count() == 0  # no greyed buttons
    assert card(lab, "c3").inner_text().count("not the third") == 1  # the reason shows once
    assert text(batch) == "Approve all (2)"

    card(lab, "c2").locator(".mibyan-approval button.mibyan-approve").click()
    assert wait_folded(lab, "c2") == "approved by you"
    assert card(lab, "c2").get_attribute("data-status") == "approved"  # waits for c1
    assert view.locator(".mibyan-batch").count() == 0  # one left: no "all" bar
    lab.screenshot("cards-two-decided")
    card(lab, "c1").locator(".mibyan-approval button.mibyan-approve").click()

    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    results = tool_results(server)
    assert [call for call, _ in results] == ["c1", "c2", "c3"]  # call order
    assert "ran 1" in results[0][1]
    assert "ran 2" in results[1][1]
    assert "not the third" in results[2][1]
    assert "ran 3" not in results[2][1]
    lab.screenshot("cards-reverse-transcript")


@pytest.mark.timeout(180)
def test_keyboard_denial_then_approve_all_and_the_cards_sections(
    lab: Lab, server: FakeProviderServer
) -> None:
    calls = [FakeCall("run_python", {"code": f"print('ran {n}')"}, id=f"c{n}") for n in (1, 2, 3)]
    hold = FakeCall("run_python", {"code": "print('held')"}, id="c4")  # keeps the view live
    server.push(
        FakeReply("Three steps.", calls=calls),
        FakeReply("One more.", calls=[hold]),
        FakeReply("Done."),
    )
    open_cell(lab, server, "approve-all.ipynb")
    first = card(lab, "c1").locator(".mibyan-approval")
    first.focus()
    lab.page.keyboard.press("Escape")
    reason = first.locator("input.mibyan-deny-reason")
    assert reason.evaluate("(node) => node === document.activeElement")
    lab.page.keyboard.type("skip the first")
    lab.page.keyboard.press("Enter")
    assert wait_folded(lab, "c1") == "denied by you: skip the first"

    batch = lab.view(1).locator(".mibyan-batch button.mibyan-approve-all")
    assert text(batch) == "Approve all (2)"
    lab.screenshot("cards-approve-all")
    batch.click()
    assert wait_folded(lab, "c2") == "approved by you"
    assert wait_folded(lab, "c3") == "approved by you"
    lab.wait_while_running(
        1,
        "(cell) => !!cell.node.querySelector("
        '\'.mibyan-tool[data-call-id="c4"] .mibyan-approval[data-pending="true"]\')',
        "the next call's approval card",
    )
    second = card(lab, "c2")
    assert second.get_attribute("data-status") == "done"
    assert text(second.locator(".mibyan-tool-args-box > summary")) == "Code (python)"
    assert "print('ran 2')" in text(second.locator("pre.mibyan-tool-args"))
    assert text(second.locator(".mibyan-tool-result > summary")).startswith("Result: ran 2")
    assert "→" in text(second.locator(".mibyan-tool-timing"))
    assert card(lab, "c1").get_attribute("data-status") == "denied"
    lab.screenshot("cards-sections")
    second.locator(".mibyan-tool-toggle").click()
    assert second.get_attribute("data-folded") == "true"
    assert not second.locator(".mibyan-tool-body").is_visible()
    assert second.locator(".mibyan-tool-head").is_visible()
    second.locator(".mibyan-tool-head").click()
    assert second.locator(".mibyan-tool-body").is_visible()

    first_batch = server.requests[1].body
    assert isinstance(first_batch, dict)
    results = [
        (m["tool_call_id"], str(m["content"]))
        for m in first_batch["messages"]
        if m["role"] == "tool"
    ]
    assert [call for call, _ in results] == ["c1", "c2", "c3"]
    assert "skip the first" in results[0][1]
    assert "ran 2" in results[1][1]
    assert "ran 3" in results[2][1]
    assert json.dumps(results).count("denied") == 1
    card(lab, "c4").locator(".mibyan-approval button.mibyan-deny").click()
    transcript = lab.wait_transcript(1)
    assert transcript.get_attribute("data-status") == "completed"
    lab.screenshot("cards-approve-all-transcript")


def in_theme(lab: Lab, theme: str, label: str) -> None:
    """A screenshot in ``theme`` (the cards use JupyterLab's variables only), then back."""
    change = "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"
    lab.page.evaluate(change, theme)
    lab.page.wait_for_function("(t) => document.body.dataset.jpThemeName === t", arg=theme)
    lab.page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
    lab.screenshot(label)
    lab.page.evaluate(change, "JupyterLab Light")
    lab.page.wait_for_function("() => document.body.dataset.jpThemeName === 'JupyterLab Light'")
    lab.page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")


@pytest.mark.timeout(180)
def test_many_cards_fold_when_done_and_long_output_keeps_its_last_lines(
    lab: Lab, server: FakeProviderServer
) -> None:
    looks = [FakeCall("list_variables", id=f"l{n}") for n in (1, 2, 3, 4)]
    chatty = FakeCall("run_python", {"code": "for i in range(3000):\n    print(i)"}, id="p1")
    hold = FakeCall("run_python", {"code": "print('held')"}, id="h1")  # keeps the view live
    server.push(
        FakeReply("Looking around.", calls=[*looks, chatty]),
        FakeReply("One more.", calls=[hold]),
        FakeReply("Done."),
    )
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        "many.ipynb", [LOAD, f"%%agent --model {model} --tools inspect,python\nLook around."]
    )
    lab.run_cell(0)
    lab.start_cell(1)
    pending = '\'.mibyan-tool[data-call-id="{}"] .mibyan-approval[data-pending="true"]\''
    lab.wait_while_running(
        1, f"(cell) => !!cell.node.querySelector({pending.format('p1')})", "p1's card"
    )
    card(lab, "p1").locator(".mibyan-approval button.mibyan-approve").click()
    lab.wait_while_running(
        1, f"(cell) => !!cell.node.querySelector({pending.format('h1')})", "the next card"
    )
    for call_id in ("l1", "l2", "l3", "l4", "p1"):  # five cards in one message: done ones fold
        assert card(lab, call_id).get_attribute("data-folded") == "true", call_id
        assert not card(lab, call_id).locator(".mibyan-tool-body").is_visible()
    assert card(lab, "h1").get_attribute("data-folded") != "true"  # it waits for you
    lab.screenshot("cards-folded")

    chatty_card = card(lab, "p1")
    chatty_card.locator(".mibyan-tool-head").click()
    output = chatty_card.locator("pre.mibyan-tool-output")
    assert output.is_visible()
    shown = output.evaluate("(node) => node.textContent")
    kept = shown.count("\n")
    assert 2000 <= kept <= 2200, kept
    assert shown.endswith("2999\n")
    dropped = text(chatty_card.locator(".mibyan-dropped"))
    assert (
        dropped == f"… {3000 - kept:,} earlier lines not shown (the result has what the model saw)"
    )
    lab.screenshot("cards-long-output")
    card(lab, "h1").locator(".mibyan-approval button.mibyan-deny").click()
    assert lab.wait_transcript(1).get_attribute("data-status") == "completed"
