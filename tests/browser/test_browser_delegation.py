"""Delegation in JupyterLab (issue 13, part 3): the parent's ``delegate_task`` card holds a
nested card for its child agent, which streams the child's own calls; the child's
``run_python`` approval card is inside it and is clicked there (the child's call id is
scoped, the click reaches the child's gate); the child's card folds; the saved transcript
keeps the child folded under the parent's call.

The loopback fake server plays both models: the parent (its request offers
``delegate_task``) delegates once, then holds the live view on an approval of its own
(denied at the end), and the child runs ``print(6 * 7)`` once approved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mibyan_jupyter.testing import FakeCall, FakeProviderServer, FakeReply
from mibyan_jupyter.testing.scripts import RecordedRequest

from .lab_driver import Lab, text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

SETUP = "%load_ext mibyan_jupyter"
GOAL = "compute six times seven"
CHILD_APPROVAL = (
    "(cell) => !!cell.node.querySelector("
    "'.mibyan-view .mibyan-tool .mibyan-child .mibyan-approval button.mibyan-approve')"
)
CHILD_DONE = (
    "(cell) => !!cell.node.querySelector('.mibyan-view .mibyan-child[data-status=completed]')"
)
PARENT_HELD = (
    "(cell) => Array.from(cell.node.querySelectorAll('.mibyan-view .mibyan-approval"
    " button.mibyan-deny')).some((b) => !b.closest('.mibyan-child') && !b.disabled)"
)


def route(request: RecordedRequest) -> FakeReply:
    """The parent's and the child's replies, by who asks and how far each has come."""
    body = request.body or {}
    tools = {tool["function"]["name"] for tool in body.get("tools") or []}
    results = sum(message["role"] == "tool" for message in body.get("messages") or [])
    if "delegate_task" in tools:
        if results == 0:
            return FakeReply(calls=[FakeCall("delegate_task", {"goal": GOAL})])
        if results == 1:  # hold the live view on an approval of the parent's own
            return FakeReply(calls=[FakeCall("run_python", {"code": "print('held')"})])
        return FakeReply("The child found it.")
    if results == 0:
        return FakeReply("Running it.", calls=[FakeCall("run_python", {"code": "print(6 * 7)"})])
    return FakeReply("It is 42.")


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(fallback=route) as fake:
        yield fake


def test_a_childs_approval_is_clicked_in_its_nested_card_which_folds(
    lab: Lab, server: FakeProviderServer
) -> None:
    model = f"fake:demo@{server.base_url}"
    lab.open_notebook(
        "delegation.ipynb", [SETUP, f"%%agent --model {model} --tools python,delegate\nDo it."]
    )
    lab.run_cell(0)
    lab.start_cell(1)
    lab.wait_while_running(1, CHILD_APPROVAL, "the child's approval card in its nested card")
    view = lab.view(1)
    child = view.locator(".mibyan-child")
    assert child.count() == 1
    assert GOAL in text(child.locator(".mibyan-child-goal"))
    assert "run_python" in text(child.locator(".mibyan-child-tools"))
    # nested in the parent's delegate_task card, its approval card inside it
    card_xpath = "xpath=ancestor::div[contains(concat(' ', @class, ' '), ' mibyan-tool ')][1]"
    holder = child.locator(card_xpath)
    assert text(holder.locator(".mibyan-tool-head .mibyan-tool-name").first) == "delegate_task"
    card = child.locator(".mibyan-approval")
    assert "6 * 7" in text(card.locator(".mibyan-approval-args"))
    assert (card.get_attribute("data-call-id") or "").startswith("child-1/")
    assert view.get_attribute("data-status") == "awaiting_approval"
    lab.screenshot("delegation-child-approval")

    card.locator("button.mibyan-approve").click()
    lab.wait_while_running(1, CHILD_DONE, "the child to finish")
    lab.wait_while_running(1, PARENT_HELD, "the parent's own approval (holding the view)")
    assert "42" in text(child.locator(".mibyan-child-body"))  # the child's run output
    assert "turns" in text(child.locator(".mibyan-child-spend"))
    body = child.locator(".mibyan-child-body")
    assert body.is_visible()
    child.locator("summary.mibyan-child-head").click()  # fold it
    assert child.evaluate("(node) => node.open") is False
    assert not body.is_visible()
    lab.screenshot("delegation-child-folded")

    own = ".mibyan-approval:not(.mibyan-child .mibyan-approval) button.mibyan-deny"
    view.locator(own).click()  # the parent's own question: the run ends
    transcript = lab.wait_transcript(1)
    saved = transcript.locator("details.mibyan-child")
    assert saved.count() == 1
    assert saved.evaluate("(node) => node.open") is False  # folded in the saved notebook
    assert GOAL in text(saved.locator("summary"))
    assert "42" in saved.evaluate("(node) => node.textContent")
    lab.screenshot("delegation-transcript")
