"""run_python: code runs in the user's namespace like a cell; its outputs are valid nbformat
outputs (what the notebook export turns into a code cell) and what the model reads."""

from __future__ import annotations

import asyncio
import base64
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.core import AbortSignal, ImagePart, TextPart, Tool, ToolResult
from mibyan_jupyter.core.messages import content_text
from mibyan_jupyter.jupyter.kernel_tools import kernel_tools

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def agg_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    plt.switch_backend("Agg")
    yield
    plt.close("all")


@contextmanager
def async_cell_sigint() -> Iterator[list[int]]:
    """A SIGINT handler like ipykernel's while an async cell runs: it only records (ipykernel
    schedules the cell's cancellation on the loop, which code blocking the loop never sees).
    Installed inside the test, over the test runner's own handler."""
    received: list[int] = []
    saved = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield received
    finally:
        restored = signal.signal(signal.SIGINT, saved)
        assert restored is not signal.default_int_handler  # the tool put the handler back


def run_python(namespace: dict[str, Any], **options: Any) -> Tool:
    (tool,) = kernel_tools(["python"], namespace=namespace, root=Path.cwd(), **options)
    return tool


async def run(tool: Tool, code: str) -> ToolResult:
    result = await tool.execute(
        "call", tool.validate({"code": code}), AbortSignal(), lambda _: None
    )
    assert isinstance(result, ToolResult)
    return result


def outputs_of(result: ToolResult) -> list[dict[str, Any]]:
    assert result.details is not None
    assert result.details["code"]
    outputs = result.details["outputs"]
    assert isinstance(outputs, list)
    return outputs


def assert_valid_cell(result: ToolResult) -> None:
    """The recorded outputs make a valid nbformat v4 code cell."""
    cell = nbformat.v4.new_code_cell(source=str((result.details or {})["code"]))
    cell.outputs = [nbformat.from_dict(o) for o in outputs_of(result)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    nbformat.validate(notebook)


async def test_prints_and_last_expression_like_a_cell() -> None:
    namespace: dict[str, Any] = {"base": 10}
    result = await run(run_python(namespace), "print('hello')\nx = base * 2\nx + 1")
    assert not result.is_error
    assert result.content == "hello\nOut: 21"
    assert outputs_of(result) == [
        {"output_type": "stream", "name": "stdout", "text": "hello\n"},
        {
            "output_type": "execute_result",
            "data": {"text/plain": "21"},
            "metadata": {},
            "execution_count": None,
        },
    ]
    assert namespace["x"] == 20  # the namespace is the user's
    assert_valid_cell(result)


async def test_outputs_keep_their_order_and_streams() -> None:
    code = (
        "import sys\nprint('one')\nprint('two')\nsys.stderr.write('careful\\n')\n"
        "print('three')\nNone"
    )
    result = await run(run_python({}), code)
    assert [(o["name"], o["text"]) for o in outputs_of(result)] == [
        ("stdout", "one\ntwo\n"),
        ("stderr", "careful\n"),
        ("stdout", "three\n"),
    ]
    assert result.content == "one\ntwo\n[stderr]\ncareful\nthree"
    assert_valid_cell(result)


async def test_no_output_and_trailing_semicolon() -> None:
    tool = run_python({})
    quiet = await run(tool, "y = 3")
    assert quiet.content == "(the code ran and produced no output)"
    assert outputs_of(quiet) == []
    hidden = await run(tool, "y * 2;  # like a cell, ';' hides the value")
    assert outputs_of(hidden) == []


async def test_the_tools_own_names_do_not_leak_into_the_namespace() -> None:
    namespace: dict[str, Any] = {}
    await run(run_python(namespace), "a = 1\ndef f():\n    return a\nf()")
    assert sorted(namespace) == ["__builtins__", "a", "f"]


async def test_code_is_not_compiled_with_this_packages_future_imports() -> None:
    namespace: dict[str, Any] = {}
    await run(run_python(namespace), "def f(x: int) -> int:\n    return x\nann = f.__annotations__")
    assert namespace["ann"] == {"x": int, "return": int}  # not the strings 'int'


async def test_exception_gives_the_users_traceback() -> None:
    code = "def ratio(a, b):\n    return a / b\n\nprint('before')\nratio(1, 0)\nprint('after')"
    result = await run(run_python({}), code)
    assert result.is_error
    outputs = outputs_of(result)
    assert outputs[0] == {"output_type": "stream", "name": "stdout", "text": "before\n"}
    error = outputs[-1]
    assert error["output_type"] == "error"
    assert (error["ename"], error["evalue"]) == ("ZeroDivisionError", "division by zero")
    traceback_text = "\n".join(error["traceback"])
    assert "line 5, in <module>\n    ratio(1, 0)" in traceback_text
    assert "line 2, in ratio\n    return a / b" in traceback_text
    assert "execute.py" not in traceback_text
    assert "exec(" not in traceback_text
    text = content_text(result.content)
    assert text.startswith("before\nTraceback (most recent call last):")
    assert text.endswith("ZeroDivisionError: division by zero")
    assert "after" not in text
    assert_valid_cell(result)


async def test_syntax_error_and_system_exit_are_results() -> None:
    tool = run_python({})
    syntax = await run(tool, "x = (\n")
    assert syntax.is_error
    assert outputs_of(syntax)[-1]["ename"] == "SyntaxError"
    assert "'(' was never closed" in content_text(syntax.content)
    exiting = await run(tool, "import sys\nsys.exit(3)")
    assert exiting.is_error
    assert outputs_of(exiting)[-1]["ename"] == "SystemExit"
    assert_valid_cell(exiting)


async def test_a_new_figure_becomes_an_image() -> None:
    existing = plt.figure()  # the user's figure: not the agent's to show or close
    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9])\nax.set_title('squares')\n"
        "print('plotted')"
    )
    result = await run(run_python({}), code)
    assert not result.is_error
    assert isinstance(result.content, tuple)
    text, image = result.content
    assert isinstance(text, TextPart)
    assert isinstance(image, ImagePart)
    assert text.text == "plotted\n[image 1, attached] <Figure size 640x480 with 1 Axes>"
    prefix = "data:image/png;base64,"
    assert image.image_url.url.startswith(prefix)
    assert base64.b64decode(image.image_url.url[len(prefix) :]).startswith(PNG_MAGIC)
    display = outputs_of(result)[-1]
    assert display["output_type"] == "display_data"
    assert display["data"]["image/png"] == image.image_url.url[len(prefix) :]
    assert plt.get_fignums() == [existing.number]  # the agent's figure was closed
    assert_valid_cell(result)


async def test_figure_as_last_expression_is_shown_once() -> None:
    result = await run(run_python({}), "import matplotlib.pyplot as plt\nplt.figure()")
    images = [p for p in result.content if isinstance(p, ImagePart)]
    assert len(images) == 1
    assert plt.get_fignums() == []


async def test_display_with_a_shell_is_captured_as_rich_output(shell: InteractiveShell) -> None:
    namespace = shell.user_ns
    namespace["df"] = pd.DataFrame({"a": [1, 2]})
    code = (
        "from IPython.display import display, Markdown\n"
        "display(Markdown('**bold**'))\nprint('between')\ndf"
    )
    result = await run(run_python(namespace, shell=shell), code)
    outputs = outputs_of(result)
    assert [o["output_type"] for o in outputs] == ["display_data", "stream", "execute_result"]
    assert outputs[0]["data"]["text/markdown"] == "**bold**"
    assert "<table" in outputs[2]["data"]["text/html"]
    assert "Out:    a\n0  1\n1  2" in content_text(result.content)
    assert_valid_cell(result)
    assert shell.display_pub.__class__.__name__ != "LogPublisher"  # restored


async def test_clear_output_and_update_display(shell: InteractiveShell) -> None:
    code = (
        "from IPython.display import display, clear_output\n"
        "display('old')\nclear_output()\nh = display('first', display_id=True)\n"
        "h.update('second')\nclear_output(wait=True)\nprint('kept')"
    )
    result = await run(run_python(shell.user_ns, shell=shell), code)
    assert outputs_of(result) == [{"output_type": "stream", "name": "stdout", "text": "kept\n"}]
    code = "from IPython.display import display\nh = display('first', display_id=True)\nh.update('second')"
    updated = await run(run_python(shell.user_ns, shell=shell), code)
    assert [o["data"]["text/plain"] for o in outputs_of(updated)] == ["'second'"]


async def test_ipython_syntax_runs_with_a_shell(shell: InteractiveShell) -> None:
    namespace = shell.user_ns
    namespace["z"] = 3
    result = await run(run_python(namespace, shell=shell), "names = %who_ls\n'z' in names")
    assert not result.is_error
    assert result.content == "Out: True"


async def test_display_without_any_shell_prints() -> None:
    assert not InteractiveShell.initialized()
    result = await run(run_python({}), "from IPython.display import display\ndisplay(42)")
    assert outputs_of(result) == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]


async def test_model_text_is_clean_and_bounded_while_outputs_keep_the_raw_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXAMPLE_API_KEY", "sk-test-0123456789abcdef")
    code = (
        "import os\nprint('\\x1b[31mred\\x1b[0m')\nprint('10%\\r50%\\r100%')\n"
        "print(os.environ['EXAMPLE_API_KEY'])\nprint('x' * 50_000)"
    )
    result = await run(run_python({}), code)
    text = content_text(result.content)
    assert text.startswith("red\n100%\n[redacted]\n")
    assert "characters omitted" in text
    assert len(text) < 8_200
    raw = outputs_of(result)[0]["text"]
    assert raw.startswith("\x1b[31mred\x1b[0m\n10%\r50%\r100%\n[redacted]\n")
    assert "sk-test" not in str(result.details)


LOOPS_UNTIL_INTERRUPTED = (
    "import _thread, threading, time\nprint('started')\n"
    "threading.Timer(0.05, _thread.interrupt_main).start()\n"
    "while True:\n    time.sleep(0.005)\nreached = True"
)


async def test_kernel_interrupt_stops_the_code_and_reports_it() -> None:
    interrupts: list[bool] = []
    namespace: dict[str, Any] = {}
    tool = run_python(namespace, on_interrupt=lambda: interrupts.append(True))
    with async_cell_sigint() as kernel_saw:
        result = await run(tool, LOOPS_UNTIL_INTERRUPTED)
        await asyncio.sleep(0)  # told on the loop's next turn, after the result is taken
    assert interrupts == [True]
    assert kernel_saw == []  # on_interrupt was told instead
    assert result.is_error
    text = content_text(result.content)
    assert text.startswith("Interrupted by the user (Kernel > Interrupt)")
    assert "started" in text
    assert "KeyboardInterrupt" in text
    assert "reached" not in namespace
    assert outputs_of(result)[-1]["ename"] == "KeyboardInterrupt"
    assert_valid_cell(result)


async def test_kernel_interrupt_without_on_interrupt_goes_to_the_kernels_handler() -> None:
    with async_cell_sigint() as kernel_saw:
        result = await run(run_python({}), LOOPS_UNTIL_INTERRUPTED)
    assert kernel_saw == [signal.SIGINT]
    assert result.is_error


async def test_stored_output_is_bounded() -> None:
    result = await run(run_python({}), "for i in range(30):\n    print('y' * 10_000)")
    stdout, note = outputs_of(result)
    assert len(stdout["text"]) == 200_000
    assert note == {
        "output_type": "stream",
        "name": "stderr",
        "text": "\n[100,030 more characters of output were not kept]\n",
    }
