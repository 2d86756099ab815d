"""The ``clarify`` tool group: the model asks the user a question in the cell.

Why on the ask card: it is the one card the kernel asks the user with (jupyter/view/ask.py),
so the question shows as the lease, compaction and budget questions do, with one button
per choice the model offers, a text box for any other answer, and "Let the agent decide".
The answer is the user's own words going to the model, which is fine as content; it is
cut to :data:`ANSWER_LIMIT` characters and shown on the card as text only.

Why it never asks for approval (``side_effects=False``): asking is not a side effect, and
an approval card before the question card would ask the user twice. It is
``sequential``, so a batch with a question runs one call at a time and no other call of
the batch runs while the user reads the question.

Without a front end (headless: nbclient, papermill, a kernel that cannot deliver clicks;
or no "rendered" from the view within ``headless_wait``) it answers at once with
:data:`NO_ONE_CAN_ANSWER`, which tells the model to go on with its own judgment. Stop
and Kernel > Interrupt end the wait (the ask's slices), the call's result is then
"cancelled" (docs/architecture.md, "Tools from outside").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mibyan_jupyter.core.tools import Tool, ToolResult, tool
from mibyan_jupyter.jupyter.view.ask import Choice, TextBox, ask

if TYPE_CHECKING:
    from mibyan_jupyter.jupyter.cell.tool_setting import ToolSetting

NO_ONE_CAN_ANSWER = (
    "No one can answer: this cell runs without a front end where the user could see the "
    "question (a headless run). Do not ask again in this run; proceed on your own "
    "judgment and say which assumptions you made."
)
"""The result when nobody can answer (headless, or no front end within the wait)."""
DECLINED = (
    'The user chose not to answer ("Let the agent decide"). Proceed on your own '
    "judgment and say which assumptions you made."
)
ANSWERED = "The user answered: "
CHOSE = "The user chose: "
MAX_CHOICES = 12
CHOICE_LIMIT = 200
"""Characters of one choice's label shown on its button."""
QUESTION_LIMIT = 4_000
ANSWER_LIMIT = 2_000
"""Characters of a typed answer taken (the text box's limit)."""
SKIP = Choice("skip", "Let the agent decide", "the agent goes on with its own judgment")


def clarify_tools(setting: ToolSetting) -> list[Tool]:
    """The ``clarify`` tool, bound to the cell's view and its headless settings."""
    view = setting.view
    plan = setting.plan

    @tool(sequential=True, side_effects=False)
    async def clarify(question: str, choices: list[str] | None = None) -> str | ToolResult:
        """Ask the user a question and wait for the answer. Use it only when you cannot
        go on well without the user's decision or information (an ambiguous request, a
        choice between approaches with different results); ask one short question.

        Args:
            question: the question, in one or two sentences.
            choices: optional short answers (at most 12) the user can click; they can
                also type another answer.
        """
        if not question.strip():
            return ToolResult("clarify needs a question", is_error=True)
        offered = _choices(choices or [])
        if len(offered) > MAX_CHOICES:
            message = f"at most {MAX_CHOICES} choices (got {len(offered)}): offer fewer"
            return ToolResult(message, is_error=True)
        if view is None or plan.headless:
            return NO_ONE_CAN_ANSWER
        buttons = [Choice(f"c{n}", label) for n, label in enumerate(offered)]
        hint = "Or type another answer" if offered else "Type your answer"
        answer = await ask(
            view,
            question.strip()[:QUESTION_LIMIT],
            [*buttons, SKIP],
            default=SKIP.value,
            headless_wait=plan.headless_wait,
            text=TextBox(f"{hint}, then Enter", ANSWER_LIMIT),
        )
        if answer.by != "user":
            return NO_ONE_CAN_ANSWER
        if answer.text is not None:
            return ANSWERED + answer.text
        if answer.value == SKIP.value:
            return DECLINED
        return CHOSE + offered[int(answer.value[1:])]

    return [clarify]


def _choices(given: list[str]) -> list[str]:
    """The model's choices as buttons: blank ones and repeats left out, each cut short."""
    seen: dict[str, None] = {}
    for text in given:
        label = " ".join(text.split())[:CHOICE_LIMIT]
        if label:
            seen.setdefault(label, None)
    return list(seen)
